package zkrecipes_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/nemesis"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The nemesis (issue 16): every recipe under randomized faults on a real
// 3-member ZooKeeper 3.8 ensemble, each client session behind its own
// proxies (one per member), judged afterwards by internal/nemesis's
// checker over the recorded history.
//
// Seven sessions, each behind three proxies of its own (one per member),
// with a 3 s session timeout. The workloads on (see internal/nemesis's
// layout):
//
//   - every client: the RWMutex (RLock, TryRLock, Lock, TryLock), the
//     Election (Campaign, Resign) and the Semaphore (Acquire, TryAcquire);
//   - the five strict clients (0-4): a Mutex each (Lock, TryLock,
//     Requeue), on "mutex" (clients 0, 1, 4), "mutex-a" (2) or "mutex-b"
//     (3); clients 3 and 4 also a MultiLock (Lock, TryLock), on {mutex,
//     mutex-a} and {mutex-a, mutex-b}, holding each path beside the plain
//     Mutexes there. Mutual exclusion is left to strict sessions so that
//     no overlap is ever excused by a server expiry the holder had not
//     heard of yet;
//   - clients 4 and 5: a PersistentNode each (ephemeral,
//     WithSessionRenewal), given new data and deleted by the other client
//     every few hundred milliseconds;
//   - client 5: a writer creating, setting and deleting nodes of a small
//     subtree; client 6: a Cache of that subtree, made again on each new
//     session;
//   - counters: AtomicLong.Add on clients 0 (WithPromotion) and 6,
//     SharedCount increments (Count, TrySetCount) on clients 1 and 6;
//   - a Queue (Curator's names): Offer on clients 2 and 5, Take or Poll on
//     0 and 6; a LockingQueue: Offer on 1 and 3, Take then Consume (or
//     Release) on 2, 4 and 5;
//   - clients 0, 2 and 3: a supervised election (RunWhileLeader, issue 25)
//     on sessions of its own through the client's proxies, expired with
//     the client's on a forced expiry; its work, fenced, counts as running
//     until it notices its context cancelled.
//
// After the heal: every lock workload acquires again, the Cache's copy
// becomes the server's tree, each PersistentNode is back with its data, the
// consumers drain both queues, the counters are read; see
// internal/nemesis for every property checked.
//
// The short run is part of the test command (bash scripts/test.sh): about
// 40 s of faults (every kind at least once), a minute or so in all
// (skipped with -short, and in the test command's second pass, on the
// embedded server). A release check runs it longer,
// and with a given seed to reproduce a failure:
//
//	go test -run TestNemesis -nemesis.duration 30m -timeout 60m -v .
//	go test -run TestNemesis -nemesis.seed 12345 -v .
//
// (or NEMESIS_DURATION=30m NEMESIS_SEED=12345 in the environment, for
// commands that pass flags to several packages). NEMESIS_HISTORY=file
// writes the whole recorded history there, NEMESIS_ZKLOG=file the members'
// logs.
var (
	nemesisSeed     = flag.Uint64("nemesis.seed", 0, "seed of TestNemesis's fault plan (default: random, printed; also $NEMESIS_SEED)")
	nemesisDuration = flag.Duration("nemesis.duration", 0, "TestNemesis's span of faults (default 40s; also $NEMESIS_DURATION)")
)

// nemesisFaults are the faults on, all of those the issue lists:
//
//   - kill -9 and restart a member: the leader, a mutex holder's member, or
//     any;
//   - SIGSTOP/SIGCONT a member (up to past the session timeout);
//   - loss of quorum: two members killed or stopped at once;
//   - a client cut off past its session timeout (every link blackholed, or
//     cut and refused), so that the server expires its session;
//   - one link of a client blackholed or paused;
//   - a client's links delayed, half the time near the strict margin;
//   - a client's connection cut right after its next create, delete, multi
//     or getChildren2, the request reaching the server or not;
//   - a session expired on purpose (counted apart by the checker);
//   - slow link then stalled member: a client's links delayed, then its
//     member stopped past the session timeout. This one is on because strict
//     mode is sound now that the Session runs on the project's own client:
//     holdings read as lost once half the session timeout has passed since
//     the send time of the newest answered request (see loss_strict_test.go).
var nemesisFaults = nemesis.AllFaults

// nemesisKnown lists the violations that are reported but do not fail the
// test, each with the finding that explains it: a property, and a text its
// message contains. Remove an entry once its finding is fixed.
var nemesisKnown = []struct{ property, contains, finding string }{
	// None open. Fixed: a LockingQueue Consume after a strict-mode Lost
	// left the live session's lock (seeds 3, 7); a cancelled Offer could
	// add its item yet return the bare context error (seed 13).
}

// knownFinding returns the finding that explains v, or "".
func knownFinding(v nemesis.Violation) string {
	for _, k := range nemesisKnown {
		if v.Property == k.property && strings.Contains(v.Msg, k.contains) {
			return k.finding
		}
	}
	return ""
}

func TestNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble and runs for a minute")
	}
	if os.Getenv("ZKTEST_SERVER") == "zkserver" {
		// The ensemble is real ZooKeeper either way: the test command's
		// second pass over the recipe suite (on the embedded server) would
		// only run the same thing again.
		t.Skip("the nemesis runs on a real ensemble; it ran in the pass on real ZooKeeper")
	}
	if sharedErr != nil {
		zktest.SkipOrFail(t, sharedErr)
	}
	seed, span := nemesisParams(t)
	t.Logf("nemesis seed %d, span %v (rerun with -nemesis.seed %d)", seed, span, seed)

	opts := zktest.Options{Servers: 3}
	if f := os.Getenv("NEMESIS_ZKLOG"); f != "" {
		// The members' logs, kept for reading a run at leisure.
		log, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		opts.Log = log
	}
	cluster := zktest.StartT(t, opts)
	leaks := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), span+5*time.Minute)
	defer cancel()
	res, err := nemesis.Run(ctx, nemesis.Options{
		Cluster: cluster,
		Base:    fmt.Sprintf("/nemesis/%d-%d", seed, time.Now().UnixNano()),
		Seed:    seed,
		Span:    span,
		Faults:  nemesisFaults,
		Logf:    t.Logf,
	})
	if res != nil {
		if f := os.Getenv("NEMESIS_HISTORY"); f != "" {
			writeHistory(t, f, res.Events)
		}
		t.Log(res.Summary)
		var failing, known []nemesis.Violation
		for _, v := range res.Report.Violations {
			if finding := knownFinding(v); finding != "" {
				known = append(known, v)
				t.Logf("known finding (%s): %v", finding, v)
			} else {
				failing = append(failing, v)
			}
		}
		if len(failing) > 0 {
			t.Errorf("%s\n%s", res.Summary, res.Explain(failing, 5))
		}
		if len(known) > 0 {
			t.Logf("%d violations of known findings, not failing the test:\n%s", len(known), res.Explain(known, 2))
		}
	}
	if err != nil {
		t.Fatalf("seed %d: the run could not be carried out: %v", seed, err)
	}
	// Restarted members' processes are waited for by goroutines of the
	// cluster's: close it before looking for leaks (Close may be called
	// again by StartT's cleanup).
	cluster.Close()
	if err := zktest.FindLeaks(leaks); err != nil {
		t.Errorf("leaked goroutines: %v", err)
	}
}

// nemesisParams reads the seed and the span from the flags, else the
// environment, else a random seed and 40 s.
func nemesisParams(t *testing.T) (uint64, time.Duration) {
	seed, span := *nemesisSeed, *nemesisDuration
	if seed == 0 {
		if v := os.Getenv("NEMESIS_SEED"); v != "" {
			var err error
			if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("NEMESIS_SEED=%q: %v", v, err)
			}
		}
	}
	if seed == 0 {
		seed = 1 + rand.Uint64N(1<<53) // printed; exact as a float too
	}
	if span == 0 {
		if v := os.Getenv("NEMESIS_DURATION"); v != "" {
			var err error
			if span, err = time.ParseDuration(v); err != nil {
				t.Fatalf("NEMESIS_DURATION=%q: %v", v, err)
			}
		}
	}
	if span == 0 {
		span = 40 * time.Second
	}
	return seed, span
}

// writeHistory writes every event of the run to file, one a line
// (NEMESIS_HISTORY=file), for reading a run at leisure.
func writeHistory(t *testing.T, file string, events []nemesis.Event) {
	f, err := os.Create(file)
	if err != nil {
		t.Errorf("history: %v", err)
		return
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	for _, e := range events {
		fmt.Fprintln(w, e)
	}
	if err := w.Flush(); err != nil {
		t.Errorf("history: %v", err)
	}
}
