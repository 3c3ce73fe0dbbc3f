package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// env is one test's telemetry, read back through the real SDK (a manual
// metric reader, a span recorder), and its path.
type env struct {
	t      *testing.T
	ctx    context.Context
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	tel    *Telemetry
	base   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	t.Cleanup(cancel)
	e := newTelemetry(t, Options{})
	e.ctx = ctx
	e.base = fmt.Sprintf("/otel-%s-%d", t.Name(), time.Now().UnixNano())
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

// newTelemetry makes a Telemetry on SDK providers of its own, without a
// server.
func newTelemetry(t *testing.T, opts Options) *env {
	e := &env{t: t, ctx: context.Background(), reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		e.tp.Shutdown(context.Background())
	})
	var err error
	if e.tel, err = New(mp, e.tp, opts); err != nil {
		t.Fatal(err)
	}
	return e
}

// session connects a Session observed by e's telemetry to addr, closed
// when the test ends.
func (e *env) session(addr string, opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	e.t.Helper()
	opts = append(append(e.tel.SessionOptions(),
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(4*time.Second)))), opts...)
	s, err := zkrecipes.NewSession(e.ctx, []string{addr}, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// value collects the metrics and returns one series' value: the sum of
// the counter or up-down counter, or the count of the histogram, whose
// attributes include these key-value pairs; 0 if there is no such series.
func (e *env) value(name string, kv ...string) float64 {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	match := func(s attribute.Set) bool {
		for i := 0; i+1 < len(kv); i += 2 {
			if v, ok := s.Value(attribute.Key(kv[i])); !ok || v.Emit() != kv[i+1] {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			e.t.Fatalf("scope %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var sum float64
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						sum += float64(p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						sum += float64(p.Count)
					}
				}
			default:
				e.t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
			return sum
		}
	}
	return 0
}

// await waits until value(name, kv...) is want.
func (e *env) await(want float64, name string, kv ...string) {
	e.t.Helper()
	zktest.Eventually(e.t, 20*time.Second, fmt.Sprintf("%s%v = %v", name, kv, want), func() error {
		if v := e.value(name, kv...); v != want {
			return fmt.Errorf("it is %v", v)
		}
		return nil
	})
}

func (e *env) expect(want float64, name string, kv ...string) {
	e.t.Helper()
	if v := e.value(name, kv...); v != want {
		e.t.Errorf("%s%v = %v, want %v", name, kv, v, want)
	}
}

// ended returns the ended spans named name.
func (e *env) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span named name.
func (e *env) one(name string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	s := e.ended(name)
	if len(s) != 1 {
		e.t.Fatalf("%d spans %s, want 1", len(s), name)
	}
	return s[0]
}

// attr returns span s's attribute k, emitted as a string ("" if unset).
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

func TestContendedLock(t *testing.T) {
	e := newEnv(t)
	p := e.base + "/lock"
	sa := e.session(shared.Addr(0))
	a := zkrecipes.NewMutex(sa, p)
	b := zkrecipes.NewMutex(e.session(shared.Addr(0)), p)
	if err := a.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "mutex", "zk.path", "all")
	e.expect(1, "zkrecipes.wait.duration", "zk.recipe", "mutex")
	aToken := a.Token()

	// b's caller has a span of its own: b's wait is its child.
	ctx, caller := e.tp.Tracer("test").Start(e.ctx, "caller")
	before := time.Now()
	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx) }()
	e.await(1, "zkrecipes.waiting", "zk.recipe", "mutex")
	// Queued is told before b's node is made: wait for the node, so that
	// b finds a's ahead of it.
	zktest.Eventually(t, 20*time.Second, "b's node", func() error {
		kids, _, err := sa.Client().Children(e.ctx, p)
		if err == nil && len(kids) != 2 {
			err = fmt.Errorf("%d nodes", len(kids))
		}
		return err
	})
	unlocked := time.Now()
	if err := a.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	bToken := b.Token()
	e.expect(0, "zkrecipes.waiting", "zk.recipe", "mutex")
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "mutex")
	e.expect(2, "zkrecipes.wait.duration", "zk.recipe", "mutex")
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	caller.End()
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "mutex")
	e.expect(0, "zkrecipes.losses")
	if v := e.value("zkrecipes.client.requests", "zk.op", "create2", "zk.code", "OK"); v < 2 {
		t.Errorf("create2 requests OK: %v, want at least 2", v)
	}
	if v := e.value("zkrecipes.client.request.duration", "zk.op", "create2"); v < 2 {
		t.Errorf("create2 request durations: %v, want at least 2", v)
	}

	waits := e.ended("zkrecipes.mutex.wait")
	if len(waits) != 2 {
		t.Fatalf("%d wait spans, want 2", len(waits))
	}
	var w sdktrace.ReadOnlySpan // b's
	for _, s := range waits {
		if s.Parent().SpanID() == caller.SpanContext().SpanID() {
			w = s
		} else if s.Parent().IsValid() {
			t.Errorf("a's wait has parent %v, want none", s.Parent().SpanID())
		}
	}
	if w == nil {
		t.Fatal("no wait span is a child of the caller's span")
	}
	if w.SpanContext().TraceID() != caller.SpanContext().TraceID() {
		t.Error("b's wait is not in its caller's trace")
	}
	if got, want := attr(w, AttrToken), fmt.Sprint(bToken); got != want {
		t.Errorf("wait span token %s, want %s (Mutex.Token)", got, want)
	}
	if got := attr(w, AttrAhead); got != "1" {
		t.Errorf("wait span ahead %s, want 1", got)
	}
	if got := attr(w, AttrOutcome); got != "granted" {
		t.Errorf("wait span outcome %q, want granted", got)
	}
	if got := attr(w, AttrPath); got != p {
		t.Errorf("wait span path %q, want %q", got, p)
	}
	if n := attr(w, AttrNode); !strings.HasPrefix(n, p+"/") {
		t.Errorf("wait span node %q, not under %s", n, p)
	}
	if w.Status().Code != codes.Unset {
		t.Errorf("wait span status %v", w.Status())
	}
	// Its true start: after the call began, before the holder let go.
	if st := w.StartTime(); st.Before(before) || !st.Before(unlocked) {
		t.Errorf("wait span starts at %v, want in [%v, %v)", st, before, unlocked)
	}

	holds := e.ended("zkrecipes.mutex.hold")
	if len(holds) != 2 {
		t.Fatalf("%d hold spans, want 2", len(holds))
	}
	for _, h := range holds {
		if attr(h, AttrOutcome) != "released" || h.Status().Code != codes.Unset {
			t.Errorf("hold span: outcome %q, status %v", attr(h, AttrOutcome), h.Status())
		}
		if h.Parent().SpanID() == caller.SpanContext().SpanID() {
			if got, want := attr(h, AttrToken), fmt.Sprint(bToken); got != want {
				t.Errorf("b's hold token %s, want %s", got, want)
			}
			if !h.StartTime().Before(w.EndTime().Add(time.Millisecond)) {
				t.Errorf("b's hold starts at %v, after its wait ended (%v)", h.StartTime(), w.EndTime())
			}
		} else if got, want := attr(h, AttrToken), fmt.Sprint(aToken); got != want {
			t.Errorf("a's hold token %s, want %s", got, want)
		}
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
	e.expect(1, "zkrecipes.abandoned", "zk.recipe", "mutex")
	e.expect(0, "zkrecipes.waiting", "zk.recipe", "mutex")
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "mutex")
	var refused sdktrace.ReadOnlySpan
	for _, s := range e.ended("zkrecipes.mutex.wait") {
		if attr(s, AttrOutcome) == "abandoned" {
			refused = s
		}
	}
	if refused == nil {
		t.Fatal("no abandoned wait span")
	}
	if st := refused.Status(); st.Code != codes.Error || !strings.Contains(st.Description, zkrecipes.ErrLocked.Error()) {
		t.Errorf("abandoned wait status %v, want Error with %q", st, zkrecipes.ErrLocked)
	}
	if attr(refused, AttrToken) != "" {
		t.Errorf("abandoned wait has a token: %s", attr(refused, AttrToken))
	}
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
	token := m.Token()
	id, pw := s.Credentials()
	if err := zktest.ExpireSession(e.ctx, shared.Addr(0), id, pw); err != nil {
		t.Fatal(err)
	}
	<-m.Lost()
	e.await(1, "zkrecipes.client.session.expiries")
	e.await(1, "zkrecipes.losses", "zk.recipe", "mutex", "zk.path", "all", "zk.loss.reason", "expired")
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "mutex")
	// Unlocking what was lost is not a second end.
	m.Unlock(e.ctx)
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "mutex")
	e.expect(1, "zkrecipes.losses")

	h := e.one("zkrecipes.mutex.hold")
	if st := h.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "expired") {
		t.Errorf("lost hold status %v, want Error naming the reason", st)
	}
	if attr(h, AttrLossReason) != "expired" || attr(h, AttrOutcome) != "lost" {
		t.Errorf("lost hold: reason %q, outcome %q", attr(h, AttrLossReason), attr(h, AttrOutcome))
	}
	if got, want := attr(h, AttrToken), fmt.Sprint(token); got != want {
		t.Errorf("lost hold token %s, want %s", got, want)
	}
}

func TestCutConnection(t *testing.T) {
	e := newEnv(t)
	px := zktest.NewProxyT(t, shared.Addr(0))
	s := e.session(px.Addr())
	e.expect(1, "zkrecipes.client.dials", "zk.outcome", "ok")
	e.expect(1, "zkrecipes.client.connects", "zk.outcome", "ok")
	px.Cut()
	e.await(1, "zkrecipes.client.reconnects")
	e.expect(1, "zkrecipes.client.connection.drops")
	e.expect(2, "zkrecipes.client.connects", "zk.outcome", "ok")
	e.expect(0, "zkrecipes.client.session.expiries")
	if _, _, err := s.Client().Exists(e.ctx, "/"); err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes.client.requests", "zk.op", "exists", "zk.code", "OK")
	for _, dir := range []string{"transmit", "receive"} {
		if v := e.value("zkrecipes.client.io", "network.io.direction", dir); v <= 0 {
			t.Errorf("bytes %s: %v", dir, v)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestStrictLoss(t *testing.T) {
	e := newEnv(t)
	px := zktest.NewProxyT(t, shared.Addr(0))
	// A short session: strict mode's margin is a part of it.
	m := zkrecipes.NewMutex(e.session(px.Addr(), zkrecipes.WithStrict(),
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(time.Second)))), e.base+"/lock")
	if err := m.Lock(e.ctx); err != nil {
		t.Fatal(err)
	}
	px.PauseReplies()
	<-m.Lost()
	e.await(1, "zkrecipes.losses", "zk.recipe", "mutex", "zk.loss.reason", "strict")
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "mutex")
	px.Pass()
	m.Unlock(e.ctx)
	e.expect(1, "zkrecipes.losses")
	if h := e.one("zkrecipes.mutex.hold"); attr(h, AttrLossReason) != "strict" || h.Status().Code != codes.Error {
		t.Errorf("hold span: reason %q, status %v", attr(h, AttrLossReason), h.Status())
	}
}

func TestPathLabel(t *testing.T) {
	e := newTelemetry(t, Options{PathLabel: func(p string) string { return strings.SplitN(p, "/", 3)[1] }})
	o := e.tel.RecipeObserver()
	o.Queued(zkrecipes.HoldEvent{Recipe: "mutex", Path: "/jobs/a"})
	o.Queued(zkrecipes.HoldEvent{Recipe: "mutex", Path: "/jobs/b"})
	e.expect(2, "zkrecipes.waiting", "zk.recipe", "mutex", "zk.path", "jobs")
	o.Granted(zkrecipes.HoldEvent{Context: context.Background(), Recipe: "mutex", Path: "/jobs/a", Node: "/jobs/a/n", Token: 7})
	if got := attr(e.one("zkrecipes.mutex.wait"), AttrPath); got != "/jobs/a" {
		t.Errorf("span path %q, want the raw path", got)
	}
}

// TestNilProviders: a nil provider turns its half off, and nothing else.
func TestNilProviders(t *testing.T) {
	ev := zkrecipes.HoldEvent{Context: context.Background(), Recipe: "election", Path: "/e", Node: "/e/n", Wait: time.Second, Held: time.Second}
	tel, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.ClientObserver() != nil {
		t.Error("a client observer without a meter provider")
	}
	if n := len(tel.SessionOptions()); n != 1 {
		t.Errorf("%d session options without providers, want 1 (the recipe observer)", n)
	}
	o := tel.RecipeObserver()
	if o.Queued != nil || o.Granted != nil || o.Lost != nil {
		t.Error("recipe observer funcs without providers")
	}

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	if tel, err = New(nil, tp, Options{}); err != nil {
		t.Fatal(err)
	}
	o = tel.RecipeObserver()
	if o.Queued != nil {
		t.Error("Queued set without metrics (it makes no span)")
	}
	start := time.Now()
	o.Granted(ev)
	o.Released(ev)
	if got := spans.Ended(); len(got) != 2 || got[0].Name() != "zkrecipes.election.wait" || got[1].Name() != "zkrecipes.election.hold" {
		t.Fatalf("spans %v", got)
	} else if d := got[0].EndTime().Sub(got[0].StartTime()); d != time.Second {
		t.Errorf("wait span lasts %v, want the event's Wait", d)
	} else if got[0].StartTime().After(start.Add(-time.Second + time.Millisecond*100)) {
		t.Errorf("wait span starts at %v, want a second before %v", got[0].StartTime(), start)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	if tel, err = New(mp, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	o = tel.RecipeObserver()
	o.Queued(ev)
	o.Granted(ev)
	if n := len(spans.Ended()); n != 2 {
		t.Errorf("spans made without a tracer provider")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) == 0 {
		t.Errorf("no metrics collected: %+v", rm.ScopeMetrics)
	}
}

// TestNoAllocs: on the real SDK, once an attribute set has been seen, a
// successful request and a lock's metrics cost no allocation of the
// adapter's (the attribute sets and option slices are made once).
func TestNoAllocs(t *testing.T) {
	// AllocsPerRun counts the process's allocations: the fewest of three
	// tries leaves out another goroutine's.
	allocs := func(f func()) float64 {
		n := testing.AllocsPerRun(1000, f)
		for range 2 {
			n = min(n, testing.AllocsPerRun(1000, f))
		}
		return n
	}
	e := newTelemetry(t, Options{})
	c := e.tel.ClientObserver()
	req := zkclient.RequestEvent{Op: "getData", Path: "/a", Latency: time.Millisecond, Sent: 30, Read: 90}
	if n := allocs(func() { c.Request(req) }); n != 0 {
		t.Errorf("a request's metrics allocate %v times", n)
	}
	tel, err := New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := tel.RecipeObserver()
	ev := zkrecipes.HoldEvent{Context: context.Background(), Recipe: "mutex", Path: "/a", Node: "/a/n", Wait: time.Millisecond, Held: time.Millisecond}
	if n := allocs(func() { o.Queued(ev); o.Granted(ev); o.Released(ev) }); n != 0 {
		t.Errorf("a lock's metrics allocate %v times", n)
	}
	item := zkrecipes.ItemEvent{Context: context.Background(), Recipe: "queue", Path: "/q", Wait: time.Millisecond}
	resync := zkrecipes.ResyncEvent{Path: "/c", Nodes: 3, Took: time.Millisecond}
	if n := allocs(func() { o.Offered(item); o.Taken(item); o.Resynced(resync) }); n != 0 {
		t.Errorf("an item's and a resync's metrics allocate %v times", n)
	}
	e.expect(3003, "zkrecipes.client.requests", "zk.op", "getData", "zk.code", "OK")
}

// BenchmarkLockUnlock is an uncontended Lock and Unlock without the
// adapter, with its metrics only, and with its metrics and spans (the SDK,
// every span sampled, recorded and dropped). Run them in interleaved
// rounds (-count) to compare them on a busy machine.
func BenchmarkLockUnlock(b *testing.B) {
	zktest.SkipOrFail(b, sharedErr)
	for _, name := range []string{"none", "metrics", "metrics+spans"} {
		b.Run(name, func(b *testing.B) {
			var opts []zkrecipes.SessionOption
			if name != "none" {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				var tp *sdktrace.TracerProvider
				if name == "metrics+spans" {
					tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
					defer tp.Shutdown(context.Background())
				}
				var tel *Telemetry
				var err error
				if tp != nil {
					tel, err = New(mp, tp, Options{})
				} else {
					tel, err = New(mp, nil, Options{})
				}
				if err != nil {
					b.Fatal(err)
				}
				opts = tel.SessionOptions()
			}
			s, err := zkrecipes.NewSession(b.Context(), []string{shared.Addr(0)}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := fmt.Sprintf("/otel-bench-%d", time.Now().UnixNano())
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

// discard is a span processor that drops what ends.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// TestQueuesAndHoldings reads back the holdings of the other recipes, the
// items offered and taken, the take span of a Queue's item, and the live
// sessions and their event backlog, which a collection reads from the
// clients and forgets once closed.
func TestQueuesAndHoldings(t *testing.T) {
	e := newEnv(t)
	s := e.session(shared.Addr(0))
	e.expect(1, "zkrecipes.client.sessions")
	ctx, caller := e.tp.Tracer("test").Start(e.ctx, "caller")
	lq := zkrecipes.NewLockingQueue(s, e.base+"/lq")
	for range 2 {
		if err := lq.Offer(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	it, err := lq.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.expect(2, "zkrecipes.items.offered", "zk.recipe", "lqueue", "zk.path", "all")
	e.expect(1, "zkrecipes.items.taken", "zk.recipe", "lqueue", "zk.path", "all")
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "lqueue")
	if err := it.Consume(ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "lqueue")
	// A LockingQueue's taking is its wait: no take span besides.
	if w := e.one("zkrecipes.lqueue.wait"); w.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Error("the lqueue wait span is not a child of the caller's")
	}
	e.one("zkrecipes.lqueue.hold")
	if n := len(e.ended("zkrecipes.lqueue.take")); n != 0 {
		t.Errorf("%d lqueue take spans, want none", n)
	}

	qp := e.base + "/q"
	q := zkrecipes.NewQueue(s, qp)
	if err := q.Offer(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := q.Take(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	e.expect(1, "zkrecipes.items.offered", "zk.recipe", "queue")
	e.expect(1, "zkrecipes.items.taken", "zk.recipe", "queue")
	e.expect(3, "zkrecipes.items.offered")
	take := e.one("zkrecipes.queue.take")
	if take.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Error("the take span is not a child of the caller's")
	}
	if got := attr(take, AttrPath); got != qp {
		t.Errorf("take span path %q, want %q", got, qp)
	}
	if st, en := take.StartTime(), take.EndTime(); st.Before(before) || en.After(after) || en.Before(st) {
		t.Errorf("take span [%v, %v], want within the call [%v, %v]", st, en, before, after)
	}
	caller.End()

	lease, err := zkrecipes.NewSemaphore(s, e.base+"/sem", 1).Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := zkrecipes.JoinGroup(e.ctx, s, e.base+"/g", "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "semaphore")
	e.expect(1, "zkrecipes.holdings", "zk.recipe", "member")
	e.expect(1, "zkrecipes.wait.duration", "zk.recipe", "semaphore")
	if err := lease.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Leave(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "semaphore")
	e.expect(0, "zkrecipes.holdings", "zk.recipe", "member")
	e.one("zkrecipes.member.hold")

	// Events left unread in a persistent watch are the backlog.
	w, err := s.Client().AddWatch(e.ctx, qp, false)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Client().Set(e.ctx, qp, nil, -1); err != nil {
			t.Fatal(err)
		}
	}
	e.await(2, "zkrecipes.client.event.backlog")
	e.expect(1, "zkrecipes.client.sessions")
	if err := w.Remove(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.expect(0, "zkrecipes.client.sessions")
	e.expect(0, "zkrecipes.client.event.backlog")
	e.tel.mu.Lock()
	n := len(e.tel.clients)
	e.tel.mu.Unlock()
	if n != 0 {
		t.Errorf("%d clients kept after their session closed, want 0", n)
	}
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
	e.expect(0, "zkrecipes.cache.resyncs")
	px.Cut()
	// One cut, one re-read (the Cache once read the tree a second time
	// when it took Reconnected after its re-read had ended).
	zktest.Eventually(t, 20*time.Second, "a cache resync", func() error {
		if v := e.value("zkrecipes.cache.resyncs", "zk.path", "all"); v != 1 {
			return fmt.Errorf("%v resyncs, want 1", v)
		}
		return nil
	})
}

func TestBadBuckets(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	for _, b := range [][]float64{{1, 0.5}, {0.1, 0.1}, {math.NaN()}, {1, math.Inf(1)}} {
		if _, err := New(mp, nil, Options{Buckets: b}); err == nil || !strings.Contains(err.Error(), "Options.Buckets") {
			t.Errorf("buckets %v: %v, want an error naming Options.Buckets", b, err)
		}
	}
	if _, err := New(mp, nil, Options{Buckets: []float64{0.001, 0.1, 1}}); err != nil {
		t.Error(err)
	}
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
	e.expect(1, "zkrecipes.acquisitions.by_grant", "zk.recipe", "mutex")
	byGrant := 0
	for _, w := range e.ended("zkrecipes.mutex.wait") {
		if attr(w, AttrByGrant) == "true" {
			byGrant++
		}
	}
	if byGrant != 1 {
		t.Errorf("%d wait spans with %s true, want 1", byGrant, AttrByGrant)
	}
}
