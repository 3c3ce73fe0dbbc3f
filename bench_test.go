package zkrecipes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Run with a fixed count:
//
//	go test -run '^$' -bench . -benchtime 2000x .
//
// Each benchmark compares workloads side by side on the same server, in
// interleaved rounds (b.N acquisitions per workload, split into rounds whose
// order rotates), because a server's speed drifts during a run (its JIT
// compiler, its log file, the disk): run one after the other, whichever ran
// later would look faster. The figures are measured by the workloads
// themselves, without session set-up. ns/op is zkrecipes' time per
// acquisition (per handoff when contended).

// rounds is how many slices each workload's acquisitions are measured in.
const rounds = 4

// BenchmarkUncontended compares one Lock+Unlock with no contention to
// go-zookeeper/zk's Lock+Unlock and to the raw cost of one create+delete
// pair.
func BenchmarkUncontended(b *testing.B) {
	compare(b, 1, false, "zkrecipes", "go-zookeeper", "floor")
}

// BenchmarkHandoff measures contended throughput at 1, 10, 100 and 500
// sessions, each locking and unlocking in a loop: zkrecipes (Unlock then
// Lock, and Requeue: both in one multi), go-zookeeper/zk's Lock, and the
// floor. vs-go-zookeeper is zkrecipes' throughput over go-zookeeper/zk's.
func BenchmarkHandoff(b *testing.B) {
	for _, n := range []int{1, 10, 100, 500} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) {
			compare(b, n, false, "zkrecipes", "zkrecipes-requeue", "go-zookeeper", "floor")
		})
	}
}

// BenchmarkHandoffChain measures handoff time on the floor's terms:
// contenders queued in advance, each unlocking as soon as it holds, none
// queueing again (BenchmarkHandoff's loop also pays each contender's next
// create). The floor is the same chain with a delete and an event per
// handoff and no reads. vs-floor is zkrecipes' handoff time over the floor's.
func BenchmarkHandoffChain(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) {
			compare(b, n, true, "zkrecipes", "go-zookeeper", "floor")
		})
	}
}

// compare runs the recipes in interleaved rounds and reports, for each, its
// acquisitions per second (and time per acquisition, uncontended), plus
// zkrecipes' requests and events per acquisition and its ratio to the
// others.
func compare(b *testing.B, contenders int, chain bool, recipes ...string) {
	if sharedErr != nil {
		zktest.SkipOrFail(b, sharedErr)
	}
	if b.N == 1 {
		return // the testing package's probe run; use -benchtime Nx
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	per := max(b.N/rounds, contenders)
	var runs []bench.Result
	for _, recipe := range bench.Interleave(recipes, rounds) {
		path := fmt.Sprintf("/bench/%s-%d-%d", recipe, contenders, time.Now().UnixNano())
		res, err := bench.Run(ctx, recipe, bench.Config{
			Servers: shared.Addrs(), Path: path, Contenders: contenders, Acquisitions: per, Chain: chain,
		})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, res)
	}
	total := make(map[string]bench.Result, len(recipes))
	for _, r := range bench.MergeEach(runs, recipes) {
		total[r.Recipe] = r
	}
	perSec := func(recipe string) float64 { return total[recipe].PerSecond }
	ours := total["zkrecipes"]
	b.ReportMetric(float64(ours.Elapsed.Nanoseconds())/float64(ours.Acquisitions), "ns/op")
	for _, recipe := range recipes {
		name := recipe
		if recipe == "floor" && contenders == 1 {
			name = "create+delete"
		}
		if contenders == 1 {
			t := total[recipe]
			b.ReportMetric(float64(t.Elapsed.Microseconds())/float64(t.Acquisitions), name+"-µs")
		} else {
			b.ReportMetric(perSec(recipe), name+"-acq/s")
		}
	}
	b.ReportMetric(ours.Listings, "listings/acq")
	b.ReportMetric(ours.Reads, "reads/acq")
	if contenders > 1 {
		b.ReportMetric(ours.EventsPerRelease, "events/release")
	}
	if _, ok := total["go-zookeeper"]; ok {
		b.ReportMetric(perSec("zkrecipes")/perSec("go-zookeeper"), "vs-go-zookeeper")
	}
	if chain {
		// Handoff time over the floor's.
		b.ReportMetric(perSec("floor")/perSec("zkrecipes"), "vs-floor")
	}
}
