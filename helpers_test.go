package zkrecipes_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The package's test helpers, each written once: a test's environment (its
// path on the shared server, its sessions, a plain client to look at the
// tree), waiting and checking, recipe-side helpers several tests share, and
// the interop contender processes.

// env is one test's view: the servers, a path of its own, and a plain client
// to look at the tree.
type env struct {
	t       *testing.T
	servers []string
	path    string
	admin   plain
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// newEnv gives a test the shared server. At cleanup it fails the test on
// goroutines the test leaked; tests call e.empty() themselves to check for
// leftover nodes while their sessions still live.
func newEnv(t *testing.T) *env {
	t.Helper()
	if sharedErr != nil {
		zktest.SkipOrFail(t, sharedErr)
	}
	return newEnvOn(t, shared.Addrs())
}

func newEnvOn(t *testing.T, servers []string) *env {
	t.Helper()
	zktest.CheckLeaks(t)
	e := &env{t: t, servers: servers, path: testPath(t)}
	e.admin = plainConn(t, servers)
	t.Cleanup(func() {
		zktest.DeleteTree(context.Background(), e.admin.c, e.path) // best effort: the test may have closed admin's session
		e.admin.c.Close()
	})
	return e
}

// testPath returns a path for one run of the test: its name and the time,
// so that a second run in the same process (-count=2) starts afresh even
// if the first left something behind.
func testPath(t *testing.T) string {
	return fmt.Sprintf("/test/%s-%s", unsafeChars.ReplaceAllString(t.Name(), "_"), strconv.FormatInt(time.Now().UnixNano(), 36))
}

// session opens a Session that is closed when the test ends.
func (e *env) session(opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	e.t.Helper()
	return e.sessionOn(e.servers, opts...)
}

func (e *env) sessionOn(servers []string, opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(20*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, servers, opts...)
	if err != nil {
		e.t.Fatalf("NewSession: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// children lists the nodes under p (none if p does not exist). The admin
// client is the test's observer: a connection it lost (a member paused or
// starved, an election) is waited out, for up to zktest.Bound(30s).
func (e *env) children(p string) []string {
	e.t.Helper()
	var kids []string
	zktest.Eventually(e.t, 30*time.Second, "children of "+p, func() error {
		var err error
		kids, _, err = e.admin.Children(p)
		switch {
		case errors.Is(err, zkclient.ErrNoNode):
			kids = nil
			return nil
		case errors.Is(err, zkclient.ErrConnectionLoss), errors.Is(err, zkclient.ErrNoServer),
			errors.Is(err, zkclient.ErrSessionMoved), errors.Is(err, context.DeadlineExceeded):
			return err
		case err != nil:
			e.t.Fatalf("children %s: %v", p, err)
		}
		return nil
	})
	return kids
}

// empty fails the test if any node is left under p.
func (e *env) empty(p string) {
	e.t.Helper()
	if kids := e.children(p); len(kids) > 0 {
		e.t.Errorf("leftover nodes under %s: %v", p, kids)
	}
}

// mkdirs creates p and its ancestors as persistent nodes (deleted with the
// test's tree at cleanup).
func (e *env) mkdirs(p string) {
	e.t.Helper()
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			_, err := e.admin.Create(p[:i], nil, zkclient.Persistent, openACL)
			if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
				e.t.Fatalf("create %s: %v", p[:i], err)
			}
		}
	}
}

// startEnsemble starts a 3-member ensemble of the test's own (skipped with
// -short, and where the shared server could not start).
func startEnsemble(t *testing.T) *zktest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	if sharedErr != nil {
		zktest.SkipOrFail(t, sharedErr)
	}
	return zktest.StartT(t, zktest.Options{Servers: 3})
}

// proxy puts a fault-injecting proxy in front of the first server.
func (e *env) proxy() *zktest.Proxy {
	e.t.Helper()
	p, err := zktest.NewProxy(e.servers[0])
	if err != nil {
		e.t.Fatalf("proxy: %v", err)
	}
	e.t.Cleanup(func() { p.Close() })
	return p
}

// expire makes the server end s's session, as if its client had died.
func (e *env) expire(s *zkrecipes.Session) {
	e.t.Helper()
	id, pw := s.Credentials()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if err := zktest.ExpireSession(ctx, e.servers[0], id, pw); err != nil {
		e.t.Fatalf("expire session 0x%x: %v", id, err)
	}
}

// expireSession is env.expire for use off the test's goroutine; a session
// that is already gone is fine.
func expireSession(t *testing.T, addr string, s *zkrecipes.Session) {
	id, pw := s.Credentials()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	err := zktest.ExpireSession(ctx, addr, id, pw)
	if err != nil && !errors.Is(err, zktest.ErrNoSession) && s.Err() == nil {
		t.Errorf("expire session 0x%x: %v", id, err)
	}
}

// watches returns the number of watches the server (the first) holds on
// the test's own nodes (e.path and below), the grant routes' left out: not
// the server-wide total, so a watch another test left behind (a killed
// contender's, until its session expires) does not count.
func (e *env) watches() int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	w, err := zkadmin.Wchp(ctx, e.servers[0])
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for p, ids := range w {
		if strings.Contains(p, ".grants/") {
			continue // a session's grant route (see zkrecipes.WithGrants), not a waiter's watch
		}
		if p == e.path || strings.HasPrefix(p, e.path+"/") {
			n += len(ids)
		}
	}
	return n
}

// lockBase takes a holding with lock (on a lock nobody holds) and returns
// the server's watch count once the holding has set the watch on its own
// node (sent after the lock call returned): a baseline for counting
// waiters' watches.
func (e *env) lockBase(ctx context.Context, lock func(context.Context) error, what string) int {
	e.t.Helper()
	before := e.watches()
	must(e.t, lock(ctx), "%s", what)
	e.waitFor("the holder's watch on its own node", func() bool { return e.watches() >= before+1 })
	return e.watches()
}

// plain is a test's plain client, for looking at and changing the tree
// behind the recipes' backs: zkclient, each call bounded by plainTimeout.
type plain struct{ c *zkclient.Client }

const plainTimeout = 20 * time.Second

// plainConn connects a plain client; the caller closes it (p.c.Close).
func plainConn(t testing.TB, servers []string) plain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(plainTimeout))
	defer cancel()
	c, err := zkclient.Connect(ctx, servers, zkclient.WithSessionTimeout(plainTimeout))
	if err != nil {
		t.Fatalf("plain connection to %v: %v", servers, err)
	}
	return plain{c}
}

func (p plain) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), zktest.Bound(plainTimeout))
}

func (p plain) Create(path string, data []byte, mode zkclient.CreateMode, acl []zkclient.ACL) (string, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	c, err := p.c.Create(ctx, path, data, mode, acl)
	return c.Path, err
}

func (p plain) Get(path string) ([]byte, zkclient.Stat, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Get(ctx, path)
}

func (p plain) Set(path string, data []byte, version int32) (zkclient.Stat, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Set(ctx, path, data, version)
}

func (p plain) Delete(path string, version int32) error {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Delete(ctx, path, version)
}

func (p plain) Exists(path string) (zkclient.Stat, bool, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Exists(ctx, path)
}

func (p plain) Children(path string) ([]string, zkclient.Stat, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Children(ctx, path)
}

func (p plain) Multi(ops ...zkclient.Op) ([]zkclient.OpResult, error) {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.Multi(ctx, ops...)
}

func (p plain) AddAuth(scheme string, auth []byte) error {
	ctx, cancel := p.ctx()
	defer cancel()
	return p.c.AddAuth(ctx, scheme, auth)
}

// openACL gives everyone every permission.
var openACL = zkclient.WorldACL(zkclient.PermAll)

// Waiting and checking.

// ctxTimeout returns a context that ends after zktest.Bound(d) or when the
// test ends.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(d))
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// check reports err as a test error (not fatal, so it may be called from
// any goroutine) and tells whether it was nil.
func check(t *testing.T, err error, what string, args ...any) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", fmt.Sprintf(what, args...), err)
		return false
	}
	return true
}

// waitFor polls cond (a test-side observation of the tree) until it holds,
// for up to zktest.Bound(30s). A wait that can say what it saw uses
// zktest.Eventually, whose failure quotes the last error.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	zktest.Eventually(e.t, 30*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// waitWatches waits until the server holds n watches on the test's nodes
// (env.watches); the failure says how many it saw last.
func (e *env) waitWatches(what string, n int) {
	e.t.Helper()
	zktest.Eventually(e.t, 30*time.Second, what, func() error {
		if got := e.watches(); got != n {
			return fmt.Errorf("%d watches under %s, want %d", got, e.path, n)
		}
		return nil
	})
}

// async runs f on its own goroutine and delivers its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// result waits for an async call to return; a call still blocked after
// zktest.Bound(30s) fails the test.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	d := zktest.Bound(30 * time.Second)
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %v", what, d)
		return nil
	}
}

// blocked fails the test if an async call has already returned.
func blocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (err=%v) but should still be waiting", what, err)
	default:
	}
}

// closed waits up to zktest.Bound(20s) for ch to be closed.
func closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	d := zktest.Bound(20 * time.Second)
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s not closed after %v", what, d)
	}
}

// cutWhile drops call's next request with opcode on its way to the server
// (the trap), keeps the client from reconnecting while meanwhile does
// another client's write, then lets it back and returns call's error
// (what names the call if it does not return).
func cutWhile(t *testing.T, p *zktest.Proxy, opcode int32, trap, what string, call func() error, meanwhile func()) error {
	t.Helper()
	p.Refuse(true)
	p.CutOnRequest(opcode, false)
	done := async(call)
	closed(t, p.Tripped(), trap)
	meanwhile()
	p.Refuse(false)
	return result(t, done, what)
}

// offerLate runs offer with the answer to its create held back by p
// (PauseReplies): once the item is on the server, under dir (which must
// exist: nothing else offer sends would be answered), and meanwhile has
// run with the item's name, it ends offer's context, and only then does
// answer decide the answer's fate (p.Pass lets it through). It returns
// offer's error.
func (e *env) offerLate(p *zktest.Proxy, dir string, offer func(context.Context) error, meanwhile func(item string), answer func()) error {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Cleanup(p.Pass) // before the session closes, whatever happened
	p.PauseReplies()
	done := async(func() error { return offer(ctx) })
	var item string
	e.waitFor("the offered item on the server", func() bool {
		kids := e.children(dir)
		if len(kids) == 0 {
			return false
		}
		item = kids[0]
		return true
	})
	blocked(t, done, "Offer with its answer held")
	meanwhile(item)
	cancel()
	answer()
	return result(t, done, "Offer")
}

// roundTrip makes sure every watch event the server sent to the sessions so
// far is counted in their Stats.
func roundTrip(t *testing.T, ss ...*zkrecipes.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	for _, s := range ss {
		must(t, zkrecipes.RoundTrip(ctx, s), "round trip")
	}
}

// events returns each session's watch events counted so far.
func events(ss []*zkrecipes.Session) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = s.Stats().WatchEvents
	}
	return out
}

// watchersOf returns how many sessions watch the node p (four-letter word
// wchp on the server at addr).
func watchersOf(t testing.TB, addr, p string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	w, err := zkadmin.Wchp(ctx, addr)
	if err != nil {
		t.Fatalf("wchp: %v", err)
	}
	return len(w[p])
}

// Recipe-side helpers shared by several tests.

// incrementShared adds one to c, as Curator users do: read, try, again.
func incrementShared(ctx context.Context, c *zkrecipes.SharedCount) error {
	for {
		v, err := c.Count(ctx)
		if err != nil {
			return err
		}
		if ok, err := c.TrySetCount(ctx, v.Value+1, v); ok || err != nil {
			return err
		}
	}
}

// render shows members as "id=data,id=data".
func render(ms []zkrecipes.Member) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.ID + "=" + string(m.Data)
	}
	return strings.Join(parts, ",")
}

// shareItems has producers offer each items apiece ("p<producer>-<n>")
// while consumers take them, each on a session of its own, until every
// item is taken; it fails the test on an item taken more than once, or
// not at all. consumer gives consumer i's take on its session, which
// returns an item's data, or false to stop (the context it is given ends
// once every item is taken); producer gives a producer's offer.
func (e *env) shareItems(ctx context.Context, producers, each, consumers int,
	consumer func(i int, s *zkrecipes.Session) func(context.Context) ([]byte, bool),
	producer func(s *zkrecipes.Session) func(context.Context, []byte) error) {
	t := e.t
	t.Helper()
	var mu sync.Mutex
	taken := map[string]int{}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range consumers {
		take := consumer(i, e.session())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				data, ok := take(cctx)
				if !ok {
					return
				}
				mu.Lock()
				taken[string(data)]++
				if len(taken) == producers*each {
					stop()
				}
				mu.Unlock()
			}
		}()
	}
	for p := range producers {
		offer := producer(e.session())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				if !check(t, offer(ctx, fmt.Appendf(nil, "p%d-%d", p, n)), "Offer") {
					return
				}
			}
		}()
	}
	wg.Wait()
	for item, n := range taken {
		if n != 1 {
			t.Errorf("item %s taken %d times", item, n)
		}
	}
	if len(taken) != producers*each {
		t.Errorf("%d distinct items taken, want %d", len(taken), producers*each)
	}
}

// Interop contenders: Curator (Java) and kazoo (Python) processes.

// interopEnv gives an interop test its env, a context and the Curator
// contender, or skips it (fails it under CI) when Java, Curator or kazoo is
// missing.
func interopEnv(t *testing.T) (*env, context.Context, func(context.Context, ...string) *exec.Cmd) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts JVMs and Python")
	}
	e := newEnv(t)
	for _, err := range []error{interop.CuratorAvailable(), interop.KazooAvailable()} {
		zktest.SkipOrFail(t, zktest.Unavailable(err))
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	curator, err := interop.BuildCurator(ctx, t.TempDir())
	must(t, err, "build the Curator contender")
	return e, ctx, curator
}

// argv renders a contender's command line, failing the test on bad Args.
func argv(t *testing.T, a interop.Args) []string {
	t.Helper()
	argv, err := a.Argv()
	must(t, err, "contender args")
	return argv
}

// contenderProc is a running interop contender.
type contenderProc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	stderr bytes.Buffer
	done   chan struct{}

	mu    sync.Mutex
	lines []string
	seen  int // lines before this one were matched by waitLine
}

// startReady starts the contenders together (their start-up overlaps) and
// waits until every one has printed READY.
func startReady(t *testing.T, cmds ...*exec.Cmd) []*contenderProc {
	t.Helper()
	procs := make([]*contenderProc, len(cmds))
	for i, cmd := range cmds {
		procs[i] = startContender(t, cmd)
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	return procs
}

func startContender(t *testing.T, cmd *exec.Cmd) *contenderProc {
	t.Helper()
	p := &contenderProc{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	out, err := cmd.StdoutPipe()
	must(t, err, "stdout pipe")
	must(t, cmd.Start(), "start %s", cmd.Path)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "READY ") {
				close(p.ready)
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

func (p *contenderProc) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-p.ready:
	case <-p.done:
		p.cmd.Wait()
		t.Fatalf("contender exited before READY: %v\nstderr: %s", p.cmd.ProcessState, p.stderr.String())
	case <-time.After(zktest.Bound(time.Minute)):
		t.Fatalf("contender not READY after %v\nstderr: %s", zktest.Bound(time.Minute), p.stderr.String())
	}
}

// printed reports whether the contender has printed line so far.
func (p *contenderProc) printed(line string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.lines, line)
}

// waitLine waits until the contender prints line, after the line the last
// waitLine matched, and fails the test if it exits or a minute passes first.
func (p *contenderProc) waitLine(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(zktest.Bound(time.Minute))
	for {
		p.mu.Lock()
		i := slices.Index(p.lines[p.seen:], line)
		if i >= 0 {
			p.seen += i + 1
		}
		printed := strings.Join(p.lines, "\n")
		p.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-p.done:
			p.mu.Lock()
			i = slices.Index(p.lines[p.seen:], line)
			p.mu.Unlock()
			if i < 0 {
				p.cmd.Wait()
				t.Fatalf("contender exited (%v) without printing %q; it printed:\n%s\nstderr: %s", p.cmd.ProcessState, line, printed, p.stderr.String())
			}
		case <-deadline:
			t.Fatalf("contender did not print %q within a minute; it printed:\n%s", line, printed)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// value waits until the contender prints a line starting with prefix and
// returns the rest of the first such line; it fails the test if the
// contender exits or a minute passes first.
func (p *contenderProc) value(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(zktest.Bound(time.Minute))
	for {
		exited := false
		select {
		case <-p.done: // every line is in by now
			exited = true
		default:
		}
		p.mu.Lock()
		for _, l := range p.lines {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				p.mu.Unlock()
				return v
			}
		}
		p.mu.Unlock()
		if exited {
			p.cmd.Wait()
			t.Fatalf("contender exited (%v) without printing %q\nstderr: %s", p.cmd.ProcessState, prefix, p.stderr.String())
		}
		select {
		case <-deadline:
			t.Fatalf("contender did not print %q within a minute", prefix)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// items returns the data of the "ITEM <data>" lines the contender printed.
func (p *contenderProc) items() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if d, ok := strings.CutPrefix(l, "ITEM "); ok {
			out = append(out, d)
		}
	}
	return out
}

func (p *contenderProc) wait(t *testing.T) {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	for _, l := range p.lines {
		if strings.HasPrefix(l, "VIOLATION") {
			t.Errorf("%s", l)
		}
	}
	if err != nil {
		t.Errorf("contender %v: %v\nstdout: %s\nstderr: %s", p.cmd.Args[len(p.cmd.Args)-1], err, strings.Join(p.lines, "\n"), p.stderr.String())
	}
}

// markExclusive claims the marker directory as an exclusive holder, as the
// interop contenders do.
func markExclusive(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "exclusive"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return errors.New("VIOLATION: another exclusive holder is inside")
	}
	if err != nil {
		return err
	}
	f.Close()
	if shared, _ := filepath.Glob(filepath.Join(dir, "shared-*")); len(shared) > 0 {
		return fmt.Errorf("VIOLATION: readers inside with an exclusive holder: %v", shared)
	}
	return nil
}

// holdExclusive marks the marker directory as an exclusive holder for
// 5ms, as the interop contenders do while they hold, and reports a
// violation it finds as an error of who's round n.
func holdExclusive(t *testing.T, marker, who string, n int) {
	t.Helper()
	if err := markExclusive(marker); err != nil {
		t.Errorf("%s round %d: %v", who, n, err)
	}
	time.Sleep(5 * time.Millisecond)
	os.Remove(filepath.Join(marker, "exclusive"))
}

// markShared claims the marker directory as a reader, as the interop
// contenders do, and returns the file to remove when leaving.
func markShared(dir, id string, n int) (string, error) {
	mine := filepath.Join(dir, fmt.Sprintf("shared-%s-%d", id, n))
	f, err := os.OpenFile(mine, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, "exclusive")); err == nil {
		return mine, errors.New("VIOLATION: a reader inside with an exclusive holder")
	}
	return mine, nil
}

// markLease marks the marker directory as one of at most n semaphore
// holders, as the interop contenders do, and returns its mark and the
// number of holders marked (its own included).
func markLease(dir string, n int, id string, round int) (string, int, error) {
	mine := filepath.Join(dir, fmt.Sprintf("lease-%s-%d", id, round))
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		return "", 0, err
	}
	holders, err := filepath.Glob(filepath.Join(dir, "lease-*"))
	if err != nil {
		return mine, 0, err
	}
	if len(holders) > n {
		return mine, len(holders), fmt.Errorf("VIOLATION: %d lease holders marked, %d permits: %v", len(holders), n, holders)
	}
	return mine, len(holders), nil
}
