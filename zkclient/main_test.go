package zkclient_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// One server (real ZooKeeper, or zkserver with ZKTEST_SERVER=zkserver)
// serves the package; each test works under a path of its own.
var (
	shared    *zktest.Cluster
	sharedErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run()) // a fuzzing worker runs only the fuzz target: no server
	}
	os.Exit(zktest.RunShared(m, zktest.Options{}, func(c *zktest.Cluster, err error) { shared, sharedErr = c, err }))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// testBase returns a path for one run of the test: its name and the time,
// so that a second run in the same process (-count=2) starts afresh.
func testBase(t *testing.T) string {
	return fmt.Sprintf("/zkclient/%s-%s", unsafeChars.ReplaceAllString(t.Name(), "_"), strconv.FormatInt(time.Now().UnixNano(), 36))
}

// env is one test's server, base path and context.
type env struct {
	t    *testing.T
	addr string
	base string
	ctx  context.Context
}

// checkLeaks fails the test if goroutines it started are left once the
// cleanups registered after checkLeaks have run.
func checkLeaks(t *testing.T) { zktest.CheckLeaks(t) }

func newEnv(t *testing.T) *env {
	t.Helper()
	zktest.SkipOrFail(t, sharedErr)
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	t.Cleanup(cancel)
	e := &env{t: t, addr: shared.Addr(0), base: testBase(t), ctx: ctx}
	admin := e.connect()
	mkdirs(t, admin, e.base)
	t.Cleanup(func() {
		a := e.connectTo(e.addr)
		// Best effort: some tests leave nodes whose ACL keeps an
		// unauthenticated client out (TestDigestAuth).
		zktest.DeleteTree(context.Background(), a, e.base)
		a.Close()
	})
	admin.Close()
	return e
}

func (e *env) connect(opts ...zkclient.Option) *zkclient.Client {
	e.t.Helper()
	return e.connectTo(e.addr, opts...)
}

func (e *env) connectTo(addr string, opts ...zkclient.Option) *zkclient.Client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, zktest.Bound(20*time.Second))
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{addr}, append([]zkclient.Option{zkclient.WithSessionTimeout(zktest.Bound(4 * time.Second))}, opts...)...)
	if err != nil {
		e.t.Fatalf("connect %s: %v", addr, err)
	}
	return c
}

// proxy puts a fault-injecting proxy in front of the server, closed when
// the test ends.
func (e *env) proxy() *zktest.Proxy {
	e.t.Helper()
	return zktest.NewProxyT(e.t, e.addr)
}

// connectProxied connects a client through a new proxy (e.proxy); the
// client is closed when the test ends, before the proxy.
func (e *env) connectProxied(opts ...zkclient.Option) (*zkclient.Client, *zktest.Proxy) {
	e.t.Helper()
	px := e.proxy()
	c := e.connectTo(px.Addr(), opts...)
	e.t.Cleanup(func() { c.Close() })
	return c, px
}

func mkdirs(t *testing.T, c *zkclient.Client, p string) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			_, err := c.Create(ctx, p[:i], nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll))
			if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
				t.Fatalf("create %s: %v", p[:i], err)
			}
		}
	}
}

// waitState reads s until a change to want, for up to zktest.Bound(15s).
func waitState(t *testing.T, s *zkclient.StateStream, want zkclient.State) zkclient.StateEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(15*time.Second))
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		if ev.State == want {
			return ev
		}
	}
}

// recv waits for a one-shot watch's event for up to zktest.Bound(d). A
// test that requires no event waits the same (scaled) time, which only
// makes its check stricter.
func recv(t *testing.T, w *zkclient.Watch, d time.Duration) (zkclient.Event, bool) {
	t.Helper()
	select {
	case ev := <-w.Event():
		return ev, true
	case <-time.After(zktest.Bound(d)):
		return zkclient.Event{}, false
	}
}
