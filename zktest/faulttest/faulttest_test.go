package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
	"github.com/zkrecipes/zkrecipes/zktest/faulttest"
)

// holder is the tests' workload on resource res: a Mutex holder that
// writes to the run's fenced register every 200 ms, steps times, stopping
// early once the register refuses it. With heed it also stops as soon as
// Lost closes, and says so; without, it ignores Lost: the bug the suite
// must catch.
func holder(res string, steps int, heed bool) faulttest.Workload {
	return func(ctx context.Context, c *faulttest.Client) (err error) {
		s, err := c.Session(ctx)
		if err != nil {
			return err
		}
		m := zkrecipes.NewMutex(s, c.Path(res))
		if err := m.Lock(ctx); err != nil {
			return err
		}
		c.Acquired(res, m.Token(), m.Lost())
		defer func() {
			c.Released(res)
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			err = errors.Join(err, m.Unlock(uctx))
		}()
		lost := m.Lost()
		if !heed {
			lost = nil // never ready
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range steps {
			select {
			case <-lost:
				c.Lost(res)
				return nil
			default:
			}
			if !c.WriteFenced(res, m.Token()) {
				return nil // fenced out: a successor wrote
			}
			select {
			case <-lost:
				c.Lost(res)
				return nil
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		return nil
	}
}

// good is a correct workload: short holdings of one Mutex shared by
// every client, heeding Lost.
var good = holder("good", 5, true)

// both runs, at once on each client's session, correct workloads and one
// that ignores Lost: the short holdings of good, shared by every client,
// and long holdings (8 s) of two Mutexes of the client's own, so that
// faults find them held: "heed-<client>", heeding Lost, and
// "bad-<client>", ignoring it.
func both(ctx context.Context, c *faulttest.Client) error {
	ws := []faulttest.Workload{good, holder(fmt.Sprintf("heed-%d", c.ID()), 40, true), holder(fmt.Sprintf("bad-%d", c.ID()), 40, false)}
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w(ctx, c) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// failures is a testing.TB that records Error and Fatal instead of
// failing: the test of a helper that must fail. The rest goes to the
// real test.
type failures struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *failures) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, s)
}
func (f *failures) Error(args ...any)                 { f.add(fmt.Sprint(args...)) }
func (f *failures) Errorf(format string, args ...any) { f.add(fmt.Sprintf(format, args...)) }
func (f *failures) Fatal(args ...any)                 { f.add(fmt.Sprint(args...)) }
func (f *failures) Fatalf(format string, args ...any) { f.add(fmt.Sprintf(format, args...)) }
func (f *failures) Fail()                             { f.add("Fail") }
func (f *failures) FailNow()                          { f.add("FailNow") }
func (f *failures) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs) > 0
}

// shared is the ensemble of the package's tests, started by the first
// that needs it and closed by TestMain.
var shared struct {
	once sync.Once
	c    *zktest.Cluster
	err  error
}

func ensemble(t *testing.T) *zktest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a fault schedule on a 3-member ensemble for about a minute")
	}
	if os.Getenv("ZKTEST_SERVER") == "zkserver" {
		t.Skip("the fault suite runs on a real ensemble; it ran in the pass on real ZooKeeper")
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
		defer cancel()
		shared.c, shared.err = zktest.Start(ctx, zktest.Options{Servers: 3})
	})
	zktest.SkipOrFail(t, shared.err)
	return shared.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := zktest.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// In the default configuration (4 strict clients, the default span: one
// round of every fault kind), a holder that ignores Lost is caught, and
// the failure names the seed, how to replay it and the property; holders
// that heed Lost, on the same sessions under the same faults, break
// nothing (and notice losses: the faults reach them).
func TestRunCatchesIgnoredLost(t *testing.T) {
	cluster := ensemble(t)
	f := &failures{TB: t}
	rep := faulttest.Run(f, faulttest.Config{Cluster: cluster}, both)
	if rep == nil {
		t.Fatalf("the run could not be carried out: %q", f.msgs)
	}
	if !rep.Failed() || !f.Failed() {
		t.Fatalf("a holder that ignores Lost was not caught (seed %d): %s", rep.Seed, rep.Summary)
	}
	var props []string
	for _, v := range rep.Violations {
		if !strings.HasPrefix(v.Resource, "bad-") {
			t.Errorf("violation outside the broken holder's resource: %v", v)
		}
		if !slices.Contains(props, v.Property) {
			props = append(props, v.Property)
		}
	}
	if strings.Contains(rep.Summary, " lost-noticed=0 ") {
		t.Errorf("the heeding holders never noticed a loss: %s", rep.Summary)
	}
	if !slices.Contains(props, "lost") && !slices.Contains(props, "exclusion") {
		t.Errorf("caught by %v, want lost or exclusion", props)
	}
	msg := strings.Join(f.msgs, "\n")
	for _, want := range []string{
		fmt.Sprintf("seed %d", rep.Seed),
		fmt.Sprintf("-faulttest.seed=%d", rep.Seed),
		fmt.Sprintf("FAULTTEST_SEED=%d", rep.Seed),
		props[0] + " violation at",
		"--- timeline around",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not say %q:\n%s", want, msg)
		}
	}
	t.Logf("caught by %v; the failure as a test would show it:\n%s", props, firstLines(msg, 60))
}

// A correct workload passes: the package example's worker, under a shorter
// schedule of the faults that close Lost hardest (a cut-off past the
// session timeout, an expiry on purpose, a stalled member).
func TestRunPassesCorrectWorkload(t *testing.T) {
	cluster := ensemble(t)
	rep := faulttest.Run(t, faulttest.Config{
		Cluster:  cluster,
		Duration: time.Second, // the first round only
		Faults:   []faulttest.Fault{faulttest.CutOff, faulttest.ForceExpiry, faulttest.PauseMember},
	}, worker) // the example's worker (example_test.go)
	if rep != nil && rep.Failed() {
		t.Errorf("a correct workload failed: %s", rep.Explain(0))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
