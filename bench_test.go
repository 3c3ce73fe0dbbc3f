package zkrecipes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Run with a fixed count so that sessions are opened once per case:
//
//	go test -run '^$' -bench . -benchtime 2000x .
//
// ns/op is the time per acquisition (per handoff when contended), measured
// by the workload itself without session set-up.

// BenchmarkUncontended compares one Lock+Unlock with no contention to the
// raw cost of one create+delete pair on the same server.
func BenchmarkUncontended(b *testing.B) {
	for _, recipe := range []string{"zkrecipes", "go-zookeeper", "floor"} {
		name := recipe
		if recipe == "floor" {
			name = "create+delete"
		}
		b.Run(name, func(b *testing.B) { runBench(b, recipe, 1) })
	}
}

// BenchmarkHandoff measures contended handoff throughput at 1, 10, 100 and
// 500 sessions for zkrecipes (Unlock then Lock, and Requeue: both in one
// multi), go-zookeeper/zk's Lock and the floor.
func BenchmarkHandoff(b *testing.B) {
	for _, n := range []int{1, 10, 100, 500} {
		for _, recipe := range []string{"zkrecipes", "zkrecipes-requeue", "go-zookeeper", "floor"} {
			b.Run(fmt.Sprintf("contenders=%d/%s", n, recipe), func(b *testing.B) { runBench(b, recipe, n) })
		}
	}
}

// BenchmarkHandoffChain measures handoff time on the floor's terms:
// contenders queued in advance, each unlocking as soon as it holds, none
// queueing again (BenchmarkHandoff's loop also pays each contender's next
// create). The floor is the same chain with a delete and an event per
// handoff and no reads.
func BenchmarkHandoffChain(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		for _, recipe := range []string{"zkrecipes", "go-zookeeper", "floor"} {
			b.Run(fmt.Sprintf("contenders=%d/%s", n, recipe), func(b *testing.B) { runBenchChain(b, recipe, n, true) })
		}
	}
}

func runBench(b *testing.B, recipe string, contenders int) {
	runBenchChain(b, recipe, contenders, false)
}

func runBenchChain(b *testing.B, recipe string, contenders int, chain bool) {
	if sharedErr != nil {
		zktest.SkipOrFail(b, sharedErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path := fmt.Sprintf("/bench/%s-%d-%d", recipe, contenders, time.Now().UnixNano())
	r, err := bench.Run(ctx, recipe, bench.Config{
		Servers: shared.Addrs(), Path: path, Contenders: contenders, Acquisitions: max(b.N, contenders), Chain: chain,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.Handoff.Nanoseconds()), "ns/op")
	b.ReportMetric(r.PerSecond, "acq/s")
	if r.Listings >= 0 {
		b.ReportMetric(r.Listings, "listings/acq")
	}
	if r.Reads >= 0 {
		b.ReportMetric(r.Reads, "reads/acq")
	}
	b.ReportMetric(r.EventsPerRelease, "events/release")
}
