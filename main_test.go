package zkrecipes_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// One real ZooKeeper serves the whole package; each test works under its
// own path.
var (
	shared    *zktest.Cluster
	sharedErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Benchmarks run against a server configured as in production.
	benchmarking := flag.Lookup("test.bench").Value.String() != ""
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	shared, sharedErr = zktest.Start(ctx, zktest.Options{Production: benchmarking})
	cancel()
	if benchmarking && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if err := bench.Warm(ctx, shared.Addrs(), "/warm"); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		cancel()
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

// env is one test's view: the servers, a path of its own, and a plain client
// to look at the tree.
type env struct {
	t       *testing.T
	servers []string
	path    string
	admin   *zk.Conn
	adminEv <-chan zk.Event
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
	leaks := goleak.IgnoreCurrent()
	e := &env{t: t, servers: servers, path: "/test/" + unsafeChars.ReplaceAllString(t.Name(), "_")}
	e.admin, e.adminEv = rawConn(t, servers)
	t.Cleanup(func() {
		deleteTree(e.admin, e.path)
		closeRaw(e.admin, e.adminEv)
		goleak.VerifyNone(t, leaks)
	})
	return e
}

// session opens a Session that is closed when the test ends.
func (e *env) session(opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	e.t.Helper()
	return e.sessionOn(e.servers, opts...)
}

func (e *env) sessionOn(servers []string, opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, servers, opts...)
	if err != nil {
		e.t.Fatalf("NewSession: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// children lists the nodes under p (none if p does not exist).
func (e *env) children(p string) []string {
	e.t.Helper()
	kids, _, err := e.admin.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("children %s: %v", p, err)
	}
	return kids
}

// empty fails the test if any node is left under p.
func (e *env) empty(p string) {
	e.t.Helper()
	if kids := e.children(p); len(kids) > 0 {
		e.t.Errorf("leftover nodes under %s: %v", p, kids)
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := zktest.ExpireSession(ctx, e.servers[0], id, pw); err != nil {
		e.t.Fatalf("expire session 0x%x: %v", id, err)
	}
}

// waitFor polls cond (a test-side observation of the tree) until it holds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watches returns the number of watches the server (the first) holds.
func (e *env) watches() int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := zktest.Watches(ctx, e.servers[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func rawConn(t testing.TB, servers []string) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, ev, err := zk.Connect(servers, 20*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("admin connection to %v: no session", servers)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, ev
}

// closeRaw closes a plain client and waits until its goroutines are gone.
func closeRaw(c *zk.Conn, ev <-chan zk.Event) {
	c.Close()
	for range ev {
	}
}

func deleteTree(c *zk.Conn, p string) {
	kids, _, err := c.Children(p)
	if err != nil {
		return
	}
	for _, k := range kids {
		deleteTree(c, p+"/"+k)
	}
	c.Delete(p, -1)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
