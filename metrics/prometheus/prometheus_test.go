package prometheus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// One real ZooKeeper serves the package; each test works under a path of
// its own.
var (
	shared    *zktest.Cluster
	sharedErr error
)

func TestMain(m *testing.M) {
	os.Exit(zktest.RunShared(m, zktest.Options{}, func(c *zktest.Cluster, err error) { shared, sharedErr = c, err }))
}

// env is one test's metrics, on a registry of its own, and its path.
type env struct {
	t    *testing.T
	ctx  context.Context
	reg  *prom.Registry
	m    *Metrics
	base string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	t.Cleanup(cancel)
	reg := prom.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, reg: reg, m: m, base: fmt.Sprintf("/metrics-%s-%d", t.Name(), time.Now().UnixNano())}
	t.Cleanup(func() {
		c, err := zkclient.Connect(context.Background(), []string{shared.Addr(0)})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if err := zktest.DeleteTree(context.Background(), c, e.base); err != nil {
			t.Error(err)
		}
	})
	return e
}

// session connects a Session observed by e's metrics to addr, closed when
// the test ends.
func (e *env) session(addr string) *zkrecipes.Session {
	e.t.Helper()
	opts := append(e.m.SessionOptions(), zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(4*time.Second))))
	s, err := zkrecipes.NewSession(e.ctx, []string{addr}, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// value reads one series back through the registry (the text exposition's
// source): the value of the gauge or counter, or the sample count of the
// histogram, named with these label values; 0 if there is no such series.
func (e *env) value(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range s.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue()
			case s.Gauge != nil:
				return s.Gauge.GetValue()
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// await waits until value(name, labels...) is want.
func (e *env) await(want float64, name string, labels ...string) {
	e.t.Helper()
	zktest.Eventually(e.t, 20*time.Second, fmt.Sprintf("%s%v = %v", name, labels, want), func() error {
		if v := e.value(name, labels...); v != want {
			return fmt.Errorf("it is %v", v)
		}
		return nil
	})
}

func (e *env) expect(want float64, name string, labels ...string) {
	e.t.Helper()
	if v := e.value(name, labels...); v != want {
		e.t.Errorf("%s%v = %v, want %v", name, labels, v, want)
	}
}

func TestContendedLock(t *testing.T) {
	e := newEnv(t)
	p := e.base + "/lock"
	a := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	b := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	if err := a.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes_holdings", "recipe", "mutex", "path", "all")
	e.expect(1, "zkrecipes_wait_seconds", "recipe", "mutex")
	done := make(chan error, 1)
	go func() { done <- b.Lock(e.ctx) }()
	e.await(1, "zkrecipes_waiting", "recipe", "mutex")
	if err := a.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes_waiting", "recipe", "mutex")
	e.expect(1, "zkrecipes_holdings", "recipe", "mutex")
	e.expect(2, "zkrecipes_wait_seconds", "recipe", "mutex")
	if err := b.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
	e.expect(0, "zkrecipes_losses_total")

	// The exposition, through the registry as a scrape sees it: the
	// second grant waited at least as long as the first held, and a
	// TryLock refused while b held is abandoned.
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP zkrecipes_holdings Holdings held: locks, leaderships, leases, taken items, memberships, registrations.
# TYPE zkrecipes_holdings gauge
zkrecipes_holdings{path="all",recipe="mutex"} 0
# HELP zkrecipes_waiting Contenders acquiring and not yet granted.
# TYPE zkrecipes_waiting gauge
zkrecipes_waiting{path="all",recipe="mutex"} 0
`), "zkrecipes_holdings", "zkrecipes_waiting"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.m.requestSeconds); n == 0 {
		t.Error("no request latency series")
	}
	if v := testutil.ToFloat64(e.m.requests.WithLabelValues("create2", "OK")); v < 2 { // the lock nodes: create2, which answers with the Stat
		t.Errorf("create2 requests OK: %v, want at least 2", v)
	}
}

func TestTryLockAbandoned(t *testing.T) {
	e := newEnv(t)
	p := e.base + "/lock"
	a := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	b := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	if err := a.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(e.ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	e.expect(1, "zkrecipes_abandoned_total", "recipe", "mutex")
	e.expect(0, "zkrecipes_waiting", "recipe", "mutex")
	e.expect(1, "zkrecipes_holdings", "recipe", "mutex")
	if err := a.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t)
	s := e.session(shared.Addr(0))
	m := zkrecipes.NewMutex(s, e.base+"/lock")
	if err := m.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	id, pw := s.Credentials()
	if err := zktest.ExpireSession(e.ctx, shared.Addr(0), id, pw); err != nil {
		t.Fatal(err)
	}
	<-m.Lost()
	e.await(1, "zkrecipes_client_session_expiries_total")
	e.await(1, "zkrecipes_losses_total", "recipe", "mutex", "reason", "expired")
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
	// Unlocking what was lost is not a second end.
	m.Unlock(e.ctx)
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
	e.expect(1, "zkrecipes_losses_total")
}

func TestNodeDeleted(t *testing.T) {
	e := newEnv(t)
	p := e.base + "/lock"
	m := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	if err := m.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	other := e.session(shared.Addr(0)).Client()
	kids, _, err := other.Children(e.ctx, p)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of %s: %v, %v", p, kids, err)
	}
	if err := other.Delete(e.ctx, p+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	<-m.Lost()
	e.await(1, "zkrecipes_losses_total", "recipe", "mutex", "reason", "deleted")
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
	m.Unlock(e.ctx)
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
}

func TestCutConnection(t *testing.T) {
	e := newEnv(t)
	px := zktest.NewProxyT(t, shared.Addr(0))
	s := e.session(px.Addr())
	e.expect(1, "zkrecipes_client_dials_total", "outcome", "ok")
	e.expect(1, "zkrecipes_client_connects_total", "outcome", "ok")
	px.Cut()
	e.await(1, "zkrecipes_client_reconnects_total")
	e.expect(1, "zkrecipes_client_connection_drops_total")
	e.expect(2, "zkrecipes_client_connects_total", "outcome", "ok")
	e.expect(0, "zkrecipes_client_session_expiries_total")
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestPathLabel(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := New(reg, Options{PathLabel: func(p string) string { return strings.SplitN(p, "/", 3)[1] }})
	if err != nil {
		t.Fatal(err)
	}
	o := m.RecipeObserver()
	o.Queued(zkrecipes.HoldEvent{Recipe: "mutex", Path: "/jobs/a"})
	o.Queued(zkrecipes.HoldEvent{Recipe: "mutex", Path: "/jobs/b"})
	if v := testutil.ToFloat64(m.waiting.WithLabelValues("mutex", "jobs")); v != 2 {
		t.Errorf("waiting on jobs: %v, want 2", v)
	}
	if _, err := New(reg, Options{}); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}

func TestStrictLoss(t *testing.T) {
	e := newEnv(t)
	px := zktest.NewProxyT(t, shared.Addr(0))
	opts := append(e.m.SessionOptions(), zkrecipes.WithStrict(),
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(4*time.Second))))
	s, err := zkrecipes.NewSession(e.ctx, []string{px.Addr()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := zkrecipes.NewMutex(s, e.base+"/lock")
	if err := m.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	px.PauseReplies()
	<-m.Lost()
	e.await(1, "zkrecipes_losses_total", "recipe", "mutex", "reason", "strict")
	e.expect(0, "zkrecipes_holdings", "recipe", "mutex")
	px.Pass()
	m.Unlock(e.ctx)
	e.expect(1, "zkrecipes_losses_total")
}

// BenchmarkLockUnlock is an uncontended Lock and Unlock without and with
// the adapter (its observers on the client and the recipes). Run the two
// in interleaved rounds (-count) to compare them on a busy machine.
func BenchmarkLockUnlock(b *testing.B) {
	zktest.SkipOrFail(b, sharedErr)
	for _, name := range []string{"none", "prometheus"} {
		b.Run(name, func(b *testing.B) {
			var opts []zkrecipes.SessionOption
			if name == "prometheus" {
				m, err := New(prom.NewRegistry(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				opts = m.SessionOptions()
			}
			s, err := zkrecipes.NewSession(b.Context(), []string{shared.Addr(0)}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := fmt.Sprintf("/metrics-bench-%d", time.Now().UnixNano())
			m := zkrecipes.NewMutex(s, p)
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Lock(b.Context()); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := s.Client().Delete(context.Background(), p, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
				b.Error(err)
			}
		})
	}
}

// TestQueuesAndHoldings reads back the holdings of the other recipes, the
// items offered and taken, and the live sessions and their event backlog.
func TestQueuesAndHoldings(t *testing.T) {
	e := newEnv(t)
	s := e.session(shared.Addr(0))
	e.expect(1, "zkrecipes_client_sessions")
	lq := zkrecipes.NewLockingQueue(s, e.base+"/lq")
	for range 2 {
		if err := lq.Offer(e.ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	it, err := lq.Take(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.expect(2, "zkrecipes_items_offered_total", "recipe", "lqueue", "path", "all")
	e.expect(1, "zkrecipes_items_taken_total", "recipe", "lqueue")
	e.expect(1, "zkrecipes_holdings", "recipe", "lqueue")
	if err := it.Consume(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes_holdings", "recipe", "lqueue")

	q := zkrecipes.NewQueue(s, e.base+"/q")
	if err := q.Offer(e.ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Take(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes_items_offered_total", "recipe", "queue")
	e.expect(1, "zkrecipes_items_taken_total", "recipe", "queue")

	lease, err := zkrecipes.NewSemaphore(s, e.base+"/sem", 1).Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := zkrecipes.JoinGroup(e.ctx, s, e.base+"/g", "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes_holdings", "recipe", "semaphore")
	e.expect(1, "zkrecipes_holdings", "recipe", "member")
	e.expect(1, "zkrecipes_wait_seconds", "recipe", "semaphore")
	if err := lease.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Leave(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes_holdings", "recipe", "semaphore")
	e.expect(0, "zkrecipes_holdings", "recipe", "member")

	// Events left unread in a persistent watch are the backlog.
	w, err := s.Client().AddWatch(e.ctx, e.base+"/q", false)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Client().Set(e.ctx, e.base+"/q", nil, -1); err != nil {
			t.Fatal(err)
		}
	}
	e.await(2, "zkrecipes_client_event_backlog")
	if err := w.Remove(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes_client_sessions")
	e.expect(0, "zkrecipes_client_event_backlog")
}

// TestCacheResync: a Cache's re-read after a cut connection is counted.
func TestCacheResync(t *testing.T) {
	e := newEnv(t)
	px := zktest.NewProxyT(t, shared.Addr(0))
	s := e.session(px.Addr())
	c, err := zkrecipes.NewCache(e.ctx, s, e.base)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e.expect(0, "zkrecipes_cache_resyncs_total")
	px.Cut()
	e.await(1, "zkrecipes_cache_resyncs_total", "path", "all")
}

// BenchmarkObserverOverhead is the adapter's cost on an uncontended
// Lock+Unlock: sessions without an observer and with the adapter (client
// and recipe observers) lock mutexes of their own in interleaved rounds
// whose order rotates, since the server's speed drifts during a run. Two
// sessions of each kind, opened in the order none, prometheus,
// prometheus, none, cancel what the order of opening costs (in an A/A run
// with one pair, the later session came out up to 20% slower). It reports
// the median over the rounds of each kind's time per Lock+Unlock and
// their ratio (prometheus/none), which the issue wants at most 1.03. Run
// it with a fixed count, several times, and take the median ratio:
//
//	go test -run '^$' -bench ObserverOverhead -benchtime 4000x -count 5 .
//
// On a loaded machine the rounds' noise exceeds 3%: OVERHEAD_AA=1 runs
// both kinds without an observer (an A/A run) to show it. adapter-µs is
// the adapter's own time per Lock+Unlock, free of that noise (its funcs
// called as often as a Lock+Unlock calls them), and adapter-share that
// time over the median Lock+Unlock without an observer.
func BenchmarkObserverOverhead(b *testing.B) {
	zktest.SkipOrFail(b, sharedErr)
	if b.N == 1 {
		return // the testing package's probe run; use -benchtime Nx
	}
	const rounds = 20
	reg := prom.NewRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	observed := []bool{false, true, true, false}
	mutexes := make([]*zkrecipes.Mutex, len(observed))
	for i, obs := range observed {
		var opts []zkrecipes.SessionOption
		if obs && os.Getenv("OVERHEAD_AA") == "" {
			opts = m.SessionOptions()
		}
		s, err := zkrecipes.NewSession(b.Context(), []string{shared.Addr(0)}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		p := fmt.Sprintf("/metrics-bench-%d-%d", i, time.Now().UnixNano())
		mutexes[i] = zkrecipes.NewMutex(s, p)
		defer s.Client().Delete(context.Background(), p, -1)
	}
	run := func(mu *zkrecipes.Mutex, n int) time.Duration {
		start := time.Now()
		for range n {
			if err := mu.Lock(b.Context()); err != nil {
				b.Fatal(err)
			}
			if err := mu.Unlock(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	per := max(b.N/rounds/2, 1) // per session and round: b.N Lock+Unlock of each kind in all
	for _, mu := range mutexes {
		run(mu, min(per, 100)) // warm up: the first slice measured is the slowest
	}
	b.ResetTimer()
	var none, with []time.Duration // per round, time per Lock+Unlock
	for r := range rounds {
		var t [2]time.Duration
		for k := range mutexes {
			i := (k + r) % len(mutexes) // rotate which goes first
			d := run(mutexes[i], per)
			if observed[i] {
				t[1] += d
			} else {
				t[0] += d
			}
		}
		none = append(none, t[0]/time.Duration(2*per))
		with = append(with, t[1]/time.Duration(2*per))
	}
	b.StopTimer()
	slices.Sort(none)
	slices.Sort(with)
	mn, mw := none[len(none)/2], with[len(with)/2]
	b.ReportMetric(float64(mn.Nanoseconds())/1e3, "none-µs")
	b.ReportMetric(float64(mw.Nanoseconds())/1e3, "prometheus-µs")
	b.ReportMetric(float64(mw)/float64(mn), "ratio")

	// The adapter's own time per Lock+Unlock, free of the server's noise:
	// its funcs called as many times as a Lock+Unlock calls them (the
	// requests counted by the adapter itself during the rounds).
	ops := float64(2 * per * rounds)
	if os.Getenv("OVERHEAD_AA") == "" {
		ops += float64(2 * min(per, 100)) // the warm-up
	}
	var reqs float64
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "zkrecipes_client_requests_total" {
			for _, s := range mf.GetMetric() {
				reqs += s.GetCounter().GetValue()
			}
		}
	}
	co, ro := m.ClientObserver(), m.RecipeObserver()
	perOp := int(reqs/ops + 0.5)
	const calls = 20000
	start := time.Now()
	for range calls {
		for range perOp {
			co.Request(zkclient.RequestEvent{Op: "create2", Latency: time.Millisecond, Sent: 80, Read: 40})
		}
		ev := zkrecipes.HoldEvent{Recipe: "mutex", Path: "/bench", Wait: time.Millisecond}
		ro.Queued(ev)
		ro.Granted(ev)
		ro.Released(ev)
	}
	own := time.Since(start) / calls
	b.ReportMetric(float64(perOp), "requests/op")
	b.ReportMetric(float64(own.Nanoseconds())/1e3, "adapter-µs")
	b.ReportMetric(float64(own)/float64(mn), "adapter-share")
}

// TestAcquisitionsByGrant: a holder that knows the next contender hands
// the lock over by grant, and only that acquisition is counted.
func TestAcquisitionsByGrant(t *testing.T) {
	e := newEnv(t)
	p := e.base + "/lock"
	var ms []*zkrecipes.Mutex
	for range 3 {
		ms = append(ms, zkrecipes.NewMutex(e.session(shared.Addr(0)), p, zkrecipes.WithGrants()))
	}
	if err := ms[0].Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The second and the third queue in that order before the first lets
	// go: the second lists, sees the third after it, and grants to it.
	look := e.session(shared.Addr(0)).Client()
	var done []chan error
	for i, m := range ms[1:] {
		ch := make(chan error, 1)
		go func() { ch <- m.Lock(e.ctx) }()
		done = append(done, ch)
		zktest.Eventually(t, 30*time.Second, "the contender queued", func() error {
			kids, _, err := look.Children(e.ctx, p)
			if err == nil && len(kids) != i+2 {
				err = fmt.Errorf("%d contenders, want %d", len(kids), i+2)
			}
			return err
		})
	}
	for i, m := range ms {
		if i > 0 {
			if err := <-done[i-1]; err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Unlock(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.expect(1, "zkrecipes_acquisitions_by_grant_total", "recipe", "mutex")
}
