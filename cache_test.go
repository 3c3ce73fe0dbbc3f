package zkrecipes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nodeState is what the tests compare of a node: its incarnation, its
// version and its data.
type nodeState struct {
	Czxid, Mzxid int64
	Version      int32
	Data         string
}

func (n nodeState) String() string {
	return fmt.Sprintf("{czxid %#x mzxid %#x v%d %q}", n.Czxid, n.Mzxid, n.Version, n.Data)
}

func stateOf(data []byte, st zkclient.Stat) nodeState {
	return nodeState{Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version, Data: string(data)}
}

func childOf(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// copyOf reads the cache's copy through its API, from its path down. It
// fails the test if the copy holds nodes that cannot be reached that way.
func copyOf(t *testing.T, c *zkrecipes.Cache) map[string]nodeState {
	t.Helper()
	out := map[string]nodeState{}
	var walk func(p string)
	walk = func(p string) {
		data, st, ok := c.Get(p)
		if !ok {
			return
		}
		out[p] = stateOf(data, st)
		for _, k := range c.Children(p) {
			walk(childOf(p, k))
		}
	}
	walk(c.Path())
	return out
}

// serverTree reads the server's tree at root with the admin client.
func (e *env) serverTree(root string) map[string]nodeState {
	e.t.Helper()
	out := map[string]nodeState{}
	var walk func(p string)
	walk = func(p string) {
		data, st, err := e.admin.Get(p)
		if errors.Is(err, zkclient.ErrNoNode) {
			return
		}
		must(e.t, err, "get %s", p)
		out[p] = nodeState{Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version, Data: string(data)}
		kids, _, err := e.admin.Children(p)
		if errors.Is(err, zkclient.ErrNoNode) {
			return
		}
		must(e.t, err, "children %s", p)
		for _, k := range kids {
			walk(childOf(p, k))
		}
	}
	walk(root)
	return out
}

// cacheModel replays a cache's events, checking each against what the
// Cache promises: the copy is a tree, and per node states only move
// forward and are never reported twice.
type cacheModel struct {
	root  string
	nodes map[string]nodeState
	born  map[string]int64 // newest czxid reported per path, across deletions
}

func newCacheModel(root string) *cacheModel {
	return &cacheModel{root: root, nodes: map[string]nodeState{}, born: map[string]int64{}}
}

func (m *cacheModel) apply(ev zkrecipes.CacheEvent) error {
	s := stateOf(ev.Data, ev.Stat)
	old, had := m.nodes[ev.Path]
	switch ev.Type {
	case zkrecipes.CacheCreated:
		switch {
		case had:
			return fmt.Errorf("created %s %v while holding %v", ev.Path, s, old)
		case ev.Path != m.root && !m.has(parentOf(ev.Path)):
			return fmt.Errorf("created %s before its parent", ev.Path)
		case s.Czxid <= m.born[ev.Path]:
			return fmt.Errorf("created %s %v: not newer than the incarnation %#x reported before", ev.Path, s, m.born[ev.Path])
		}
		m.nodes[ev.Path], m.born[ev.Path] = s, s.Czxid
	case zkrecipes.CacheChanged:
		switch {
		case !had:
			return fmt.Errorf("changed %s, not held", ev.Path)
		case s.Czxid != old.Czxid || s.Mzxid <= old.Mzxid || s.Version <= old.Version:
			return fmt.Errorf("changed %s from %v to %v: not a newer version of it", ev.Path, old, s)
		}
		m.nodes[ev.Path] = s
	case zkrecipes.CacheDeleted:
		switch {
		case !had:
			return fmt.Errorf("deleted %s, not held", ev.Path)
		case old != s:
			return fmt.Errorf("deleted %s reporting %v, held %v", ev.Path, s, old)
		}
		for p := range m.nodes {
			if parentOf(p) == ev.Path && p != ev.Path {
				return fmt.Errorf("deleted %s before its child %s", ev.Path, p)
			}
		}
		delete(m.nodes, ev.Path)
	default:
		return fmt.Errorf("unexpected %v event for %s", ev.Type, ev.Path)
	}
	return nil
}

func (m *cacheModel) has(p string) bool { _, ok := m.nodes[p]; return ok }

// drainEvents returns the events queued now, without waiting.
func drainEvents(t *testing.T, c *zkrecipes.Cache) []zkrecipes.CacheEvent {
	t.Helper()
	var out []zkrecipes.CacheEvent
	for {
		select {
		case <-c.Ready():
		default:
			return out
		}
		ev, err := c.Next(context.Background())
		if err != nil {
			t.Fatalf("cache events: %v", err)
		}
		out = append(out, ev)
	}
}

// nextEvent waits for the cache's next event.
func nextEvent(t *testing.T, c *zkrecipes.Cache) zkrecipes.CacheEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	ev, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("cache event: %v", err)
	}
	return ev
}

// initialEvents reads the events of the initial load, up to and including
// CacheInitialized, and returns the model they build.
func initialEvents(t *testing.T, c *zkrecipes.Cache) *cacheModel {
	t.Helper()
	m := newCacheModel(c.Path())
	for {
		ev := nextEvent(t, c)
		if ev.Type == zkrecipes.CacheInitialized {
			if ev.Path != c.Path() {
				t.Fatalf("initialized event for %q, want %q", ev.Path, c.Path())
			}
			return m
		}
		if ev.Type != zkrecipes.CacheCreated {
			t.Fatalf("initial load reported %v %s", ev.Type, ev.Path)
		}
		if err := m.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTree reports how two trees differ ("" if they do not).
func sameTree(got, want map[string]nodeState) string {
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s %v", p, want[p]))
		} else if g != want[p] {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", p, g, want[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %s %v", p, got[p]))
		}
	}
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	return strings.Join(diffs, "; ")
}

// waitCopy waits until the cache's copy equals the server's tree, then
// checks that nothing outside that tree is held.
func (e *env) waitCopy(c *zkrecipes.Cache) map[string]nodeState {
	e.t.Helper()
	var want map[string]nodeState
	e.waitFor("the cache to equal the server's tree", func() bool {
		want = e.serverTree(c.Path())
		return sameTree(copyOf(e.t, c), want) == ""
	})
	if c.Len() != len(want) {
		e.t.Fatalf("cache holds %d nodes, %d of them reachable from %s", c.Len(), len(want), c.Path())
	}
	return want
}

func (e *env) create(p, data string) {
	e.t.Helper()
	_, err := e.admin.Create(p, []byte(data), zkclient.Persistent, openACL)
	must(e.t, err, "create %s", p)
}

func (e *env) set(p, data string) {
	e.t.Helper()
	_, err := e.admin.Set(p, []byte(data), -1)
	must(e.t, err, "set %s", p)
}

func (e *env) del(p string) {
	e.t.Helper()
	must(e.t, e.admin.Delete(p, -1), "delete %s", p)
}

func newCache(t *testing.T, s *zkrecipes.Session, path string, opts ...zkrecipes.CacheOption) *zkrecipes.Cache {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	c, err := zkrecipes.NewCache(ctx, s, path, opts...)
	if err != nil {
		t.Fatalf("NewCache %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func expectEvent(t *testing.T, c *zkrecipes.Cache, m *cacheModel, typ zkrecipes.CacheEventType, path, data string) {
	t.Helper()
	ev := nextEvent(t, c)
	if ev.Type != typ || ev.Path != path || string(ev.Data) != data {
		t.Fatalf("event %v %s %q, want %v %s %q", ev.Type, ev.Path, ev.Data, typ, path, data)
	}
	if err := m.apply(ev); err != nil {
		t.Fatal(err)
	}
}

// TestCacheBasic loads a tree, follows creates, changes and deletes of its
// nodes and of its root, and leaves no watch once closed.
func TestCacheBasic(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root + "/a")
	e.create(root+"/b", "b1")
	s := e.session()
	leaks := goleak.IgnoreCurrent()
	c := newCache(t, s, root)
	m := initialEvents(t, c)
	if d := sameTree(m.nodes, e.serverTree(root)); d != "" {
		t.Fatalf("initial events: %s", d)
	}
	if got := c.Children(root); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Children(%s) = %q", root, got)
	}
	if data, st, ok := c.Get(root + "/b"); !ok || string(data) != "b1" || st.Version != 0 {
		t.Fatalf("Get(b) = %q, %+v, %v", data, st, ok)
	}
	if _, _, ok := c.Get(root + "/nothing"); ok {
		t.Fatal("Get of a missing node reports it")
	}
	if n := watchersOf(t, e.servers[0], root); n != 1 {
		t.Fatalf("%d sessions watch %s, want 1", n, root)
	}

	e.create(root+"/a/x", "x1")
	expectEvent(t, c, m, zkrecipes.CacheCreated, root+"/a/x", "x1")
	e.set(root+"/b", "b2")
	expectEvent(t, c, m, zkrecipes.CacheChanged, root+"/b", "b2")
	e.set(root+"/b", "b2") // the same data: still a new version
	expectEvent(t, c, m, zkrecipes.CacheChanged, root+"/b", "b2")
	e.del(root + "/a/x")
	expectEvent(t, c, m, zkrecipes.CacheDeleted, root+"/a/x", "x1")
	if got := c.Children(root + "/a"); len(got) != 0 {
		t.Fatalf("Children(a) = %q after its child's delete", got)
	}

	// The root itself goes and comes back.
	e.del(root + "/a")
	e.del(root + "/b")
	e.del(root)
	for range 3 {
		if ev := nextEvent(t, c); ev.Type != zkrecipes.CacheDeleted {
			t.Fatalf("event %v %s, want deletes", ev.Type, ev.Path)
		} else if err := m.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 0 {
		t.Fatalf("cache holds %d nodes of a deleted tree", c.Len())
	}
	e.create(root, "again")
	expectEvent(t, c, m, zkrecipes.CacheCreated, root, "again")
	e.waitCopy(c)

	must(t, c.Close(), "close")
	if _, err := c.Next(context.Background()); !errors.Is(err, zkrecipes.ErrStreamClosed) {
		t.Fatalf("Next after Close: %v, want ErrStreamClosed", err)
	}
	closed(t, c.Done(), "Done after Close")
	if !errors.Is(c.Err(), zkrecipes.ErrStreamClosed) {
		t.Fatalf("Err after Close = %v", c.Err())
	}
	if data, _, ok := c.Get(root); !ok || string(data) != "again" {
		t.Fatalf("the copy is gone after Close: %q %v", data, ok)
	}
	if n := watchersOf(t, e.servers[0], root); n != 0 {
		t.Fatalf("%d sessions still watch %s after Close", n, root)
	}
	if err := zktest.FindLeaks(leaks); err != nil { // the session's goroutines are older
		t.Errorf("leaked goroutines: %v", err)
	}
	must(t, c.Close(), "close again")
}

// TestCacheSingleNode follows one node, not its children.
func TestCacheSingleNode(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/node"
	s := e.session()
	c := newCache(t, s, root, zkrecipes.WithSingleNode())
	m := initialEvents(t, c)
	if len(m.nodes) != 0 {
		t.Fatalf("initial load of a missing node: %v", m.nodes)
	}
	e.mkdirs(e.path)
	e.create(root, "v1")
	expectEvent(t, c, m, zkrecipes.CacheCreated, root, "v1")
	e.create(root+"/kid", "k")
	e.set(root, "v2")
	// The child's creation gives no event: the next one is the change.
	expectEvent(t, c, m, zkrecipes.CacheChanged, root, "v2")
	if got := c.Children(root); len(got) != 0 || c.Len() != 1 {
		t.Fatalf("single-node cache holds children %q (%d nodes)", got, c.Len())
	}
	e.del(root + "/kid")
	e.del(root)
	expectEvent(t, c, m, zkrecipes.CacheDeleted, root, "v2")
}

// TestCacheWithoutEvents keeps the copy without an event stream.
func TestCacheWithoutEvents(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root)
	e.create(root+"/a", "1")
	s := e.session()
	c := newCache(t, s, root, zkrecipes.WithoutEvents())
	if _, err := c.Next(context.Background()); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Fatalf("Next WithoutEvents: %v", err)
	}
	e.set(root+"/a", "2")
	e.waitCopy(c)
}

// TestCacheInvalidPath fails before any request.
func TestCacheInvalidPath(t *testing.T) {
	e := newEnv(t)
	s := e.session()
	for _, p := range []string{"", "rel", "/a/", "/a//b"} {
		if _, err := zkrecipes.NewCache(context.Background(), s, p); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("NewCache(%q): %v, want ErrInvalidPath", p, err)
		}
	}
}

// TestCacheResync makes changes of every kind while the cache's connection
// is down: the server restores its persistent watch on reconnection but
// reports none of them, so the cache must read the tree again and report
// each difference, exactly once.
func TestCacheResync(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root + "/c/x")
	e.create(root+"/a", "a1")
	e.create(root+"/b", "b1")
	e.create(root+"/d", "d1")
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})
	c := newCache(t, s, root)
	m := initialEvents(t, c)

	p.Refuse(true)
	p.Cut()
	e.waitFor("the session to be suspended", func() bool { return !s.Connected() })
	e.set(root+"/a", "a2") // changed
	e.del(root + "/b")     // deleted
	e.del(root + "/c/x")   // deleted, with its parent
	e.del(root + "/c")     // ... which is made again, with a new child
	e.create(root+"/c", "c2")
	e.create(root+"/c/y", "y1")
	e.create(root+"/e", "e1") // created
	e.set(root+"/d", "d2")    // changed twice: one event, for the last
	e.set(root+"/d", "d3")
	p.Refuse(false)
	want := e.waitCopy(c)

	evs := drainEvents(t, c)
	for _, ev := range evs {
		if err := m.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if d := sameTree(m.nodes, want); d != "" {
		t.Fatalf("the events do not give the server's tree: %s", d)
	}
	if passes, _ := zkrecipes.CacheCounts(c); passes < 2 {
		t.Fatalf("the cache read the tree %d times, want the initial load and one after the reconnection", passes)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%v %s %s", ev.Type, strings.TrimPrefix(ev.Path, root), ev.Data))
	}
	slices.Sort(got)
	wantEvs := []string{
		"changed /a a2", "changed /d d3", "created /c c2", "created /c/y y1", "created /e e1",
		"deleted /b b1", "deleted /c ", "deleted /c/x ",
	}
	if !slices.Equal(got, wantEvs) {
		t.Fatalf("events after the reconnection:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEvs, "\n"))
	}
}

// TestCacheExpiry: once the session expires the cache stops, says why,
// and keeps its last copy.
func TestCacheExpiry(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root)
	e.create(root+"/a", "a1")
	s := e.session(zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(4 * time.Second)))
	c := newCache(t, s, root)
	m := initialEvents(t, c)
	e.set(root+"/a", "a2")
	e.expire(s)
	closed(t, c.Done(), "Done after expiry")
	if !errors.Is(c.Err(), zkrecipes.ErrSessionExpired) {
		t.Fatalf("Err after expiry = %v, want ErrSessionExpired", c.Err())
	}
	ctx := ctxTimeout(t, 30*time.Second)
	for {
		ev, err := c.Next(ctx)
		if err != nil {
			if !errors.Is(err, zkrecipes.ErrSessionExpired) {
				t.Fatalf("Next after expiry: %v, want ErrSessionExpired", err)
			}
			break
		}
		if err := m.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if data, _, ok := c.Get(root + "/a"); !ok || string(data) != string(m.nodes[root+"/a"].Data) {
		t.Fatalf("copy after expiry: %q %v, events said %v", data, ok, m.nodes[root+"/a"])
	}
	must(t, c.Close(), "close after expiry")
	if _, err := zkrecipes.NewCache(ctx, s, root); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Fatalf("NewCache on an expired session: %v", err)
	}
}

// writerOp is one change reported by testdata/cache_writer.py.
type writerOp struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Czxid   int64  `json:"czxid"`
	Mzxid   int64  `json:"mzxid"`
	Version int32  `json:"version"`
	Data    string `json:"data"`
}

func (o writerOp) state() nodeState {
	return nodeState{Czxid: o.Czxid, Mzxid: o.Mzxid, Version: o.Version, Data: o.Data}
}

// kazooWriter runs testdata/cache_writer.py.
type kazooWriter struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func startKazooWriter(t *testing.T, ctx context.Context, servers []string, root string, seed int64) *kazooWriter {
	t.Helper()
	zktest.SkipOrFail(t, zktest.Unavailable(interop.KazooAvailable()))
	cmd := exec.CommandContext(ctx, interop.Python, "-I", "testdata/cache_writer.py",
		"--connect", strings.Join(servers, ","), "--root", root, "--seed", fmt.Sprint(seed))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	must(t, err, "writer stdin")
	out, err := cmd.StdoutPipe()
	must(t, err, "writer stdout")
	must(t, cmd.Start(), "start the kazoo writer")
	w := &kazooWriter{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	t.Cleanup(func() {
		fmt.Fprintln(in, "quit")
		in.Close()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("kazoo writer: %v", err)
		}
	})
	if line := w.line(t); line != "READY" {
		t.Fatalf("kazoo writer said %q, want READY", line)
	}
	return w
}

func (w *kazooWriter) line(t *testing.T) string {
	t.Helper()
	if !w.lines.Scan() {
		t.Fatalf("kazoo writer ended: %v", w.lines.Err())
	}
	return w.lines.Text()
}

// round has the writer make n changes; each is passed to seen as it is
// reported.
func (w *kazooWriter) round(t *testing.T, r, n int, seen func(writerOp)) {
	t.Helper()
	fmt.Fprintf(w.in, "round %d %d\n", r, n)
	for {
		line := w.line(t)
		if line == fmt.Sprintf("DONE %d", r) {
			return
		}
		var op writerOp
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			t.Fatalf("kazoo writer said %q: %v", line, err)
		}
		seen(op)
	}
}

// cutter breaks the cache's connection at random moments until stopped:
// a plain cut (the client reconnects at once), an outage (connections
// refused for a while, so that changes are made while the cache is away),
// or a cut at the next listing (in the middle of reading the tree again).
func cutter(p *zktest.Proxy, rng *rand.Rand) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-quit:
			return false
		}
	}
	go func() {
		defer close(done)
		defer p.Refuse(false)
		for sleep(time.Duration(10+rng.IntN(60)) * time.Millisecond) {
			switch r := rng.Float64(); {
			case r < 0.4:
				p.Cut()
			case r < 0.8:
				p.Refuse(true)
				p.Cut()
				sleep(time.Duration(20+rng.IntN(120)) * time.Millisecond)
				p.Refuse(false)
			default:
				p.CutOnRequest(jute.OpGetChildren2, true)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// TestCacheChurn has kazoo churn a subtree (creates, sets, deletes, and
// transactions that create or delete a parent with its child) while the
// cache's connection is cut again and again, in rounds; after each round
// it waits for the copy to equal the server's tree and checks the events
// of the round against the writer's history:
//
//   - replayed on the model built from the previous events, they give the
//     server's tree; every step is a valid one (see cacheModel: the copy
//     stays a tree, a node's versions only move forward, none is repeated);
//   - every Created or Changed event reports a state the writer made, and
//     every Deleted event a delete it made; for each node, the events map
//     to the writer's changes of that node in the round in order (a
//     subsequence: versions overwritten before the cache read them may be
//     skipped, never reordered or repeated);
//   - a node the writer changed exactly once in the round gets exactly one
//     event, whether the change was made while the cache was connected or
//     cut off; a node it did not change gets none.
//
// The cache is started during round 0, while the writer builds the tree, so
// that the initial load meets concurrent changes.
func TestCacheChurn(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	ctx := ctxTimeout(t, 3*time.Minute)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	w := startKazooWriter(t, ctx, e.servers, root, seed%1_000_000)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})

	history := map[nodeState]string{} // every state the writer made -> its path
	var ops []writerOp
	seen := func(op writerOp) {
		ops = append(ops, op)
		if op.Op != "delete" {
			history[op.state()] = op.Path
		}
	}

	// Round 0: the tree is built while the cache loads.
	type made struct {
		c   *zkrecipes.Cache
		err error
	}
	loaded := make(chan made, 1)
	n := 0
	w.round(t, 0, 150, func(op writerOp) {
		seen(op)
		if n++; n == 60 {
			go func() {
				c, err := zkrecipes.NewCache(ctx, s, root)
				loaded <- made{c, err}
			}()
		}
	})
	l := <-loaded
	must(t, l.err, "NewCache")
	c := l.c
	t.Cleanup(func() { c.Close() })
	m := initialEvents(t, c)
	check := func(round int, evs []zkrecipes.CacheEvent, roundOps []writerOp, strict bool) {
		t.Helper()
		byPath := map[string][]writerOp{}
		for _, op := range roundOps {
			byPath[op.Path] = append(byPath[op.Path], op)
		}
		next := map[string]int{} // per path: index of the next op an event may map to
		count := map[string]int{}
		for _, ev := range evs {
			if err := m.apply(ev); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			st := stateOf(ev.Data, ev.Stat)
			if ev.Type != zkrecipes.CacheDeleted && ev.Path != root && history[st] != ev.Path {
				t.Fatalf("round %d: %v %s %v: a state the writer never made", round, ev.Type, ev.Path, st)
			}
			count[ev.Path]++
			if !strict {
				continue
			}
			h := byPath[ev.Path]
			j := next[ev.Path]
			for j < len(h) && !matches(ev, st, h[j]) {
				j++
			}
			if j == len(h) {
				t.Fatalf("round %d: %v %s %v matches none of the writer's changes of it in the round after the %dth: %+v", round, ev.Type, ev.Path, st, next[ev.Path], h)
			}
			next[ev.Path] = j + 1
		}
		if !strict {
			return
		}
		for path, h := range byPath {
			if len(h) == 1 && count[path] != 1 {
				t.Fatalf("round %d: %s changed once (%+v), %d events", round, path, h[0], count[path])
			}
		}
		for path := range count {
			if byPath[path] == nil {
				t.Fatalf("round %d: events for %s, which the writer did not change", round, path)
			}
		}
	}
	want := e.waitCopy(c)
	check(0, drainEvents(t, c), nil, false)
	if d := sameTree(m.nodes, want); d != "" {
		t.Fatalf("round 0: the events do not give the server's tree: %s", d)
	}

	rounds, events := 10, 0
	for r := 1; r <= rounds; r++ {
		ops = ops[:0]
		stop := cutter(p, rng)
		w.round(t, r, 120, seen)
		stop()
		want := e.waitCopy(c)
		evs := drainEvents(t, c)
		events += len(evs)
		check(r, evs, ops, true)
		if d := sameTree(m.nodes, want); d != "" {
			t.Fatalf("round %d: the events do not give the server's tree: %s", r, d)
		}
	}
	passes, deferred := zkrecipes.CacheCounts(c)
	t.Logf("%d rounds, %d events, %d nodes at the end; %d reads of the whole tree, %d node reads deferred", rounds, events, c.Len(), passes, deferred)
	if passes < 2 {
		t.Fatalf("the cache read the tree %d times: the cuts did not make it read again", passes)
	}
}

// matches reports whether a cache event is the outcome of the writer's op.
func matches(ev zkrecipes.CacheEvent, st nodeState, op writerOp) bool {
	if ev.Type == zkrecipes.CacheDeleted {
		return op.Op == "delete" && op.Czxid == st.Czxid
	}
	return op.Op != "delete" && op.state() == st
}

// TestCacheResyncParentRemade remakes a node's parent in the middle of a
// pass over the tree, between the parent's listing and the node's read:
// the node read then belongs to the new parent, not to the one the copy
// holds, and must not be placed under it. The pass leaves it to the
// watch's events, which report the four changes exactly once each.
func TestCacheResyncParentRemade(t *testing.T) {
	e := newEnv(t)
	p := e.proxy()
	root := e.path + "/tree"
	e.parentRemade(e.sessionOn([]string{p.Addr()}), root, root+"/a/x", "the pass over the tree", func() {
		p.Cut() // the cache reads the tree again after the reconnection
	})
}

// TestCacheEventParentRemade remakes a node's parent after the watch event
// for the node arrived and before the cache reads it: the node read
// belongs to the new parent, which the copy does not hold yet, so it is
// left for the events still to come.
func TestCacheEventParentRemade(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.parentRemade(e.session(), root, root, "the reads of the event", func() {
		e.set(root+"/a/x", "x1b") // its event makes the cache read /a/x, after its ancestors
	})
}

// parentRemade makes root/a and root/a/x and a Cache of root on s, arms it
// to delete and make both again just before its next read of readAt, and
// calls trigger to make it read; once the read is done (what) it checks
// that the events report the four changes exactly once each, give the
// server's tree, and that the node read was deferred.
func (e *env) parentRemade(s *zkrecipes.Session, root, readAt, what string, trigger func()) {
	t := e.t
	t.Helper()
	e.mkdirs(root)
	e.create(root+"/a", "a1")
	e.create(root+"/a/x", "x1")
	var armed atomic.Bool
	c := newCache(t, s, root, zkrecipes.WithBeforeRead(func(path string) {
		if path == readAt && armed.CompareAndSwap(true, false) {
			e.del(root + "/a/x")
			e.del(root + "/a")
			e.create(root+"/a", "a2")
			e.create(root+"/a/x", "x2")
		}
	}))
	m := initialEvents(t, c)
	armed.Store(true)
	trigger()
	e.waitFor(what, func() bool { return !armed.Load() })
	want := e.waitCopy(c)
	var got []string
	for _, ev := range drainEvents(t, c) {
		if err := m.apply(ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %s %s", ev.Type, strings.TrimPrefix(ev.Path, root), ev.Data))
	}
	if d := sameTree(m.nodes, want); d != "" {
		t.Fatalf("the events do not give the server's tree: %s", d)
	}
	wantEvs := []string{"deleted /a/x x1", "deleted /a a1", "created /a a2", "created /a/x x2"}
	if !slices.Equal(got, wantEvs) {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEvs, "\n"))
	}
	if _, deferred := zkrecipes.CacheCounts(c); deferred == 0 {
		t.Fatal("the node read was not deferred")
	}
}

// TestCacheLoadRace changes the tree while the initial load reads it: a
// node changed after its parent's listing and before its own read, a child
// deleted and a sibling created after that listing. The watch is set
// before the load, so the load and the events that follow it report each
// change once.
func TestCacheLoadRace(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root)
	e.create(root+"/a", "a1")
	e.create(root+"/a/x", "x1")
	s := e.session()
	var once sync.Once
	c := newCache(t, s, root, zkrecipes.WithBeforeRead(func(path string) {
		if path == root+"/a" {
			once.Do(func() {
				e.set(root+"/a", "a2")
				e.del(root + "/a/x")
				e.create(root+"/b", "b1")
			})
		}
	}))
	var got []string
	for {
		ev := nextEvent(t, c)
		got = append(got, fmt.Sprintf("%v %s %s", ev.Type, strings.TrimPrefix(ev.Path, root), ev.Data))
		if ev.Type == zkrecipes.CacheInitialized {
			break
		}
	}
	e.waitCopy(c)
	for _, ev := range drainEvents(t, c) {
		got = append(got, fmt.Sprintf("%v %s %s", ev.Type, strings.TrimPrefix(ev.Path, root), ev.Data))
	}
	want := []string{"created  ", "created /a a2", "initialized  ", "created /b b1"}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCacheLoadNodeGoneBetweenReads deletes a node after the initial load
// sent the read of its data and before it lists its children, through the
// Cache's own session, so that the server applies the delete between the
// two reads: the data read finds the node, the listing does not. The load
// must report the tree as it ended, creations only: the node neither
// created nor deleted before CacheInitialized. (The fault suite's seed 7
// caught a Cache reporting such a node deleted before CacheInitialized,
// 2026-12-03.)
func TestCacheLoadNodeGoneBetweenReads(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root)
	e.create(root+"/a", "a1")
	e.create(root+"/a/x", "x1")
	s := e.session()
	ctx := ctxTimeout(t, 30*time.Second)
	var deleted atomic.Bool
	c := newCache(t, s, root, zkrecipes.WithBeforeList(func(path string) {
		if path == root+"/a/x" && deleted.CompareAndSwap(false, true) {
			if err := s.Delete(ctx, path, -1); err != nil {
				t.Errorf("delete %s: %v", path, err)
			}
		}
	}))
	if !deleted.Load() {
		t.Fatal("the load never listed a/x")
	}
	m := initialEvents(t, c)
	if d := sameTree(m.nodes, e.waitCopy(c)); d != "" {
		t.Fatalf("the initial events do not give the server's tree: %s", d)
	}
	if evs := drainEvents(t, c); len(evs) != 0 {
		t.Fatalf("events after the load: %v", evs)
	}
}

var cacheMeasure = flag.Bool("cache-measure", false, "run TestCacheLoadMeasure: time and memory to load a 10,000-node subtree, beside kazoo's TreeCache")

// TestCacheLoadMeasure measures, once, the time and the memory a Cache takes
// to load a subtree of 10,001 nodes (100 nodes of 99 children each, 32
// bytes of data per node), and the same for kazoo's TreeCache on the same
// tree. It only runs with -cache-measure, without -race:
//
//	go test -count=1 -run TestCacheLoadMeasure -cache-measure -v .
func TestCacheLoadMeasure(t *testing.T) {
	if !*cacheMeasure {
		t.Skip("a measurement: run with -cache-measure")
	}
	e := newEnv(t)
	root := e.path + "/tree"
	ctx := ctxTimeout(t, 10*time.Minute)
	s := e.session()
	cl := s.Client()
	acl := zkclient.WorldACL(zkclient.PermAll)
	data := []byte(strings.Repeat("d", 32))
	e.mkdirs(e.path)
	var paths []string
	paths = append(paths, root)
	for i := range 100 {
		paths = append(paths, fmt.Sprintf("%s/p%03d", root, i))
	}
	for i := range 100 {
		for j := range 99 {
			paths = append(paths, fmt.Sprintf("%s/p%03d/c%03d", root, i, j))
		}
	}
	// Requests in flight, a thousand at a time.
	pipeline := func(paths []string, start func(string) func() error) {
		for len(paths) > 0 {
			n := min(len(paths), 1000)
			waits := make([]func() error, n)
			for i, p := range paths[:n] {
				waits[i] = start(p)
			}
			for i, wait := range waits {
				must(t, wait(), "%s", paths[i])
			}
			paths = paths[n:]
		}
	}
	create := func(p string) func() error {
		call := cl.CreateAsync(p, data, zkclient.Persistent, acl)
		return func() error { _, err := call.Wait(ctx); return err }
	}
	pipeline(paths[:101], create) // the root and its children first: answered in order
	pipeline(paths[101:], create)
	t.Cleanup(func() {
		rev := slices.Clone(paths)
		slices.Reverse(rev)
		pipeline(rev, func(p string) func() error {
			call := cl.DeleteAsync(p, -1)
			return func() error { _, err := call.Wait(ctx); return err }
		})
	})

	// The floor: the same number of reads, pipelined, with nothing kept.
	start := time.Now()
	pipeline(paths, func(p string) func() error {
		get, list := cl.GetAsync(p), cl.ChildrenAsync(p)
		return func() error {
			if _, err := get.Wait(ctx); err != nil {
				return err
			}
			_, err := list.Wait(ctx)
			return err
		}
	})
	t.Logf("%-32s %6d nodes  %7.1f ms", "getData+getChildren2, pipelined", len(paths), time.Since(start).Seconds()*1000)

	for _, variant := range []struct {
		name string
		opts []zkrecipes.CacheOption
	}{{"zkrecipes Cache, WithoutEvents", []zkrecipes.CacheOption{zkrecipes.WithoutEvents()}}, {"zkrecipes Cache, events queued", nil}} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		c, err := zkrecipes.NewCache(ctx, s, root, variant.opts...)
		elapsed := time.Since(start)
		must(t, err, "NewCache")
		runtime.GC()
		runtime.ReadMemStats(&after)
		t.Logf("%-32s %6d nodes  %7.1f ms  %6.2f MB held", variant.name, c.Len(), elapsed.Seconds()*1000, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6)
		runtime.KeepAlive(c)
		c.Close()
	}

	if err := interop.KazooAvailable(); err != nil {
		t.Skip(err)
	}
	out, err := exec.CommandContext(ctx, interop.Python, "-I", "testdata/treecache_load.py",
		"--connect", strings.Join(e.servers, ","), "--path", root).Output()
	must(t, err, "kazoo TreeCache")
	var k struct {
		Seconds  float64 `json:"seconds"`
		Bytes    int64   `json:"bytes"`
		RSSBytes int64   `json:"rss_bytes"`
		Nodes    int     `json:"nodes"`
	}
	must(t, json.Unmarshal(out, &k), "kazoo's figures %q", out)
	t.Logf("%-32s %6d nodes  %7.1f ms  %6.2f MB held (tracemalloc; resident set grew %.2f MB)", "kazoo 2.8 TreeCache", k.Nodes, k.Seconds*1000, float64(k.Bytes)/1e6, float64(k.RSSBytes)/1e6)
}
