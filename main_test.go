package zkrecipes_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

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
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
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
	if code == 0 && shared != nil && !benchmarking {
		// A session no test closed. The wait covers the 10s default
		// timeout of a session whose client could not close it (a killed
		// contender, a cut link).
		if err := zktest.NoSessions(shared.Addr(0), 15*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "zkrecipes tests:", err)
			code = 1
		}
	}
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}
