package zktest

import (
	"context"
	"os"
	"strconv"
	"testing"
)

// StartT starts ZooKeeper like Start and closes it when the test ends
// (tb.Cleanup). If Java or ZooKeeper is not installed it skips the test
// with the reason, or fails it when running in CI (see SkipOrFail), also
// when only opts need them (an ensemble or Options.TLS under
// ZKTEST_SERVER=zkserver, or TLS without Netty's jars); any other startup
// error fails the test.
func StartT(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	SkipOrFail(tb, Available())
	ctx, cancel := context.WithTimeout(tb.Context(), defaultStartTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	// Available does not know opts: an ensemble or a TLS server needs Java
	// even with ZKTEST_SERVER=zkserver.
	SkipOrFail(tb, err)
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return c
}

// SkipOrFail reports err, typically the error of a server started once in
// TestMain, to one test. It does nothing when err is nil. When err says that
// Java or ZooKeeper is not installed (as the errors of Available and Start
// do), the test is skipped with that reason, except in CI (environment
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

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}
