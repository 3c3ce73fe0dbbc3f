package zktest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// StartT starts ZooKeeper like Start and closes it when the test ends
// (tb.Cleanup); if the test failed, the members' directories (their data,
// transaction logs and zookeeper.log) stay for a post-mortem, and the test's
// log says where. If Java or ZooKeeper is not installed it skips the test
// with the reason, or fails it when running in CI (see SkipOrFail), also
// when only opts need them (an ensemble, Options.TLS, Kerberos or
// RealZooKeeper while the embedded server stands in, see [ServerEnv], or
// TLS without Netty's jars); any other startup error fails the test.
func StartT(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	SkipOrFail(tb, Available())
	ctx, cancel := context.WithTimeout(tb.Context(), defaultStartTimeout())
	defer cancel()
	c, err := Start(ctx, opts)
	// Available does not know opts: an ensemble or a TLS server needs Java
	// even with ZKTEST_SERVER=zkserver.
	SkipOrFail(tb, err)
	tb.Cleanup(func() {
		if tb.Failed() && c.emb == nil {
			c.mu.Lock()
			c.keep = true
			c.mu.Unlock()
			defer tb.Logf("zktest: the test failed; the members' directories (data, transaction logs, zookeeper.log, configuration) are kept in %s", c.dir)
		}
		if err := c.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return c
}

// NewProxyT starts a proxy to target like NewProxy and closes it when the
// test ends (tb.Cleanup), reporting an error of Close; a failure to start
// fails the test. A cleanup the test registers later runs before the
// proxy closes, so a client closed there still reaches its server.
func NewProxyT(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return p
}

// SkipOrFail reports err, typically the error of a server started once in
// TestMain, to one test. It does nothing when err is nil. When err says that
// Java or ZooKeeper is not installed (as the errors of Available and Start
// do), or err is marked by Unavailable, the test is skipped with that reason, except in CI (environment
// variable CI set to a true value such as "true" or "1"), where it fails so
// that missing servers are never skipped silently. Any other error fails
// the test.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if isUnavailable(err) && !inCI() {
		tb.Skipf("%v", err)
	}
	tb.Fatalf("%v", err)
}

// Unavailable marks err, a report that something a test needs is not
// installed (a contender's interpreter or library, say), so that SkipOrFail
// treats it as it treats a missing Java or ZooKeeper: the test is skipped,
// or fails in CI. The error's text stays err's, and errors.Is and errors.As
// still see err. A nil err stays nil. It costs one allocation.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &missingError{err}
}

// missingError is an error marked by Unavailable.
type missingError struct{ err error }

func (e *missingError) Error() string { return e.err.Error() }
func (e *missingError) Unwrap() error { return e.err }

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// NoSessions waits up to [Bound](d) for the server at addr to track no
// session (its answer to "dump", see [zkadmin.Dump]), and returns an error
// listing those left. At the end of a package whose tests share one server
// (TestMain), it tells that every test closed its sessions; d covers the
// timeout of a session whose client could not say goodbye (a dead link, a
// killed process).
func NoSessions(addr string, d time.Duration) error {
	return Poll(Bound(d), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), Bound(5*time.Second))
		defer cancel()
		dump, err := zkadmin.Dump(ctx, addr)
		if err != nil {
			return err
		}
		if n := len(dump.Sessions); n > 0 {
			return fmt.Errorf("%d sessions left on %s: %#x", n, addr, dump.Sessions)
		}
		return nil
	})
}
