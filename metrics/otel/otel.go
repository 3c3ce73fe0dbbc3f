// Package otel exports the metrics and traces of zkrecipes sessions and
// their clients to OpenTelemetry, through the observers of the zkclient
// and zkrecipes packages.
//
//	t, err := otel.New(meterProvider, tracerProvider, otel.Options{})
//	...
//	s, err := zkrecipes.NewSession(ctx, servers, t.SessionOptions()...)
//
// It is the sibling of the Prometheus adapter (metrics/prometheus): the
// same events, counted under OpenTelemetry's names (docs/metrics.md lists
// both), with the same bounded attributes: request metrics by operation
// (zk.op) and outcome code (zk.code, from [zkclient.CodeName]), recipe
// metrics by recipe kind (zk.recipe) and by a path attribute (zk.path)
// that Options.PathLabel derives from the recipe's path (by default the
// same value, "all", for every path: raw paths would give one series per
// lock). The instrumentation scope of the meter and the tracer is
// [ScopeName]. One Telemetry may serve any number of sessions.
//
// # Traces
//
// Each acquisition that ends is told as a span, a child of the span in
// the context given to the call (Lock, RLock, Campaign, Acquire, Take,
// JoinGroup, Register, ...):
//
//   - zkrecipes.<recipe>.wait (recipe is mutex, read, write, election,
//     semaphore, lqueue, member or registration, as in
//     [zkrecipes.HoldEvent]) from the call to its grant or its failure. A
//     grant sets zk.node (the contender's node), zk.token (the fencing
//     token, as Mutex.Token returns it; left out for a recipe without one)
//     zk.ahead (the contenders queued before it when it first looked:
//     0 for an uncontended lock) and zk.by_grant (it held on its
//     predecessor's grant, without a listing: see zkrecipes.WithGrants); a failure (TryLock refused, the
//     context's end, the session's) records the error and sets the span's
//     status to Error. zk.outcome is granted or abandoned.
//   - zkrecipes.<recipe>.hold from the grant to its end, with zk.node and
//     zk.token. zk.outcome is released or lost; a loss sets zk.loss.reason
//     (expired, closed, strict, deleted) and the status Error, and an
//     unconfirmed release records ErrReleaseUnconfirmed as an event.
//   - zkrecipes.queue.take, for an item a Queue's Take or Poll took, from
//     the call to the taking. A LockingQueue's Take has none: its wait
//     span, zkrecipes.lqueue.wait, is the same interval. A Take or Poll
//     that fails is not told, so has no span.
//
// All carry zk.path, the raw path: a span is one event, not a series.
// A trace of a contended lock shows, under the caller's span, the wait
// with the number of contenders ahead, then the hold, beside the spans of
// the work done under the lock; the wait ends as the previous holder's
// hold span (in that holder's trace) ends, and zk.token ties the work to
// the grant. The spans are made when the wait or hold ends, with their
// true start time, so the adapter keeps no state between events; a hold
// that never ends (the process dies) has no span.
//
// Requests have no spans: a request's event carries no context.
package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ScopeName is the instrumentation scope name of the meter and the tracer
// the adapter obtains from its providers: the module path.
const ScopeName = "github.com/zkrecipes/zkrecipes/metrics/otel"

// Attribute keys of the adapter's metrics and spans.
const (
	AttrOp         = attribute.Key("zk.op")                // a request's wire name: create, getData, multi, ...
	AttrCode       = attribute.Key("zk.code")              // a request's outcome: zkclient.CodeName
	AttrDirection  = attribute.Key("network.io.direction") // transmit or receive
	AttrOutcome    = attribute.Key("zk.outcome")           // ok or error (dials, connects); the end of a wait or hold (spans)
	AttrRecipe     = attribute.Key("zk.recipe")            // mutex, read, write, election, semaphore, lqueue, member, registration; queue (items)
	AttrPath       = attribute.Key("zk.path")              // Options.PathLabel's value on metrics; the raw path on spans
	AttrLossReason = attribute.Key("zk.loss.reason")       // expired, closed, strict, deleted
	AttrNode       = attribute.Key("zk.node")              // the contender's node (spans)
	AttrToken      = attribute.Key("zk.token")             // the grant's fencing token (spans)
	AttrAhead      = attribute.Key("zk.ahead")             // contenders queued before the grant's node (spans)
	AttrByGrant    = attribute.Key("zk.by_grant")          // the contender held on its predecessor's grant, without a listing (spans; zkrecipes.WithGrants)
)

// Options configures a Telemetry.
type Options struct {
	// PathLabel maps a recipe's path to the value of the zk.path
	// attribute of the recipe metrics. It must return few distinct values
	// (a prefix, a lock's role); by default every path is "all". Spans
	// carry the raw path.
	PathLabel func(path string) string

	// Buckets are the duration histograms' explicit bucket boundaries, in
	// seconds, finite and increasing, given to the meter as advice (a
	// View may override them). By default, those of the Prometheus
	// adapter: 5ms to 10s.
	Buckets []float64
}

// defaultBuckets are Prometheus's DefBuckets, so that the two adapters'
// histograms compare.
var defaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Telemetry holds the instruments, made with the MeterProvider given to
// [New], the tracer of its TracerProvider, and the observers that feed
// them. It is safe for concurrent use.
type Telemetry struct {
	pathLabel func(string) string
	tracer    trace.Tracer // nil: no spans
	metrics   bool         // false: no metrics

	requestDuration metric.Float64Histogram // zk.op
	requests        metric.Int64Counter     // zk.op, zk.code
	bytes           metric.Int64Counter     // network.io.direction
	dials           metric.Int64Counter     // zk.outcome
	connects        metric.Int64Counter     // zk.outcome
	drops           metric.Int64Counter
	reconnects      metric.Int64Counter
	expiries        metric.Int64Counter
	watchEvents     metric.Int64Counter

	waitDuration metric.Float64Histogram   // zk.recipe, zk.path
	waiting      metric.Int64UpDownCounter // zk.recipe, zk.path
	holdings     metric.Int64UpDownCounter // zk.recipe, zk.path
	abandoned    metric.Int64Counter       // zk.recipe, zk.path
	byGrant      metric.Int64Counter       // zk.recipe, zk.path
	losses       metric.Int64Counter       // zk.recipe, zk.path, zk.loss.reason
	unconfirmed  metric.Int64Counter       // zk.recipe, zk.path
	offered      metric.Int64Counter       // zk.recipe, zk.path
	taken        metric.Int64Counter       // zk.recipe, zk.path
	resyncs      metric.Int64Counter       // zk.path

	mu      sync.Mutex
	clients map[*zkclient.Client]struct{} // told by Opened; forgotten at a collection once done

	// Attribute sets by key, made once: ops, codes, recipes and path
	// labels are bounded sets, so these are too.
	attrs sync.Map // attrKey -> *attrs

	sent, read, ok, failed *attrs
}

// attrs are the options that give a measurement one attribute set, as
// slices made once: the instruments' methods are variadic, and a slice
// made at each call would escape.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(kv ...attribute.KeyValue) *attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// attrKey names a cached attribute set: its kind and its values.
type attrKey struct {
	kind    attrKind
	a, b, c string
}

type attrKind uint8

const (
	opAttrs      attrKind = iota // zk.op=a
	requestAttrs                 // zk.op=a, zk.code=b
	recipeAttrs                  // zk.recipe=a, zk.path=b
	lossAttrs                    // zk.recipe=a, zk.path=b, zk.loss.reason=c
	pathAttrs                    // zk.path=a
)

// New creates the adapter's instruments with mp and its spans' tracer
// with tp. Either may be nil: a nil mp makes no metrics, a nil tp no
// spans (an untyped nil: a nil pointer in the interface is a provider). It
// fails if opts.Buckets are not increasing, or if mp refuses an
// instrument.
func New(mp metric.MeterProvider, tp trace.TracerProvider, opts Options) (*Telemetry, error) {
	t := &Telemetry{pathLabel: opts.PathLabel, clients: make(map[*zkclient.Client]struct{})}
	if t.pathLabel == nil {
		t.pathLabel = func(string) string { return "all" }
	}
	if tp != nil {
		t.tracer = tp.Tracer(ScopeName)
	}
	t.sent = newAttrs(AttrDirection.String("transmit"))
	t.read = newAttrs(AttrDirection.String("receive"))
	t.ok = newAttrs(AttrOutcome.String("ok"))
	t.failed = newAttrs(AttrOutcome.String("error"))
	if mp == nil {
		return t, nil
	}
	t.metrics = true
	buckets := opts.Buckets
	if buckets == nil {
		buckets = defaultBuckets
	}
	for i, b := range buckets {
		if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= buckets[i-1] {
			return nil, fmt.Errorf("otel: Options.Buckets %v: want finite bounds in increasing order", buckets)
		}
	}
	m := mp.Meter(ScopeName)
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("otel: instrument %s: %w", name, err))
		}
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		check(name, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(name, err)
		return c
	}
	updown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(name, err)
		return c
	}
	t.requestDuration = hist("zkrecipes.client.request.duration",
		"Time from a ZooKeeper request's call to its end, by operation.")
	t.requests = counter("zkrecipes.client.requests", "{request}",
		"ZooKeeper requests ended, by operation and outcome code.")
	t.bytes = counter("zkrecipes.client.io", "By",
		"Bytes of request (transmit) and reply (receive) frames.")
	t.dials = counter("zkrecipes.client.dials", "{dial}",
		"Network connections attempted to a ZooKeeper server, by outcome.")
	t.connects = counter("zkrecipes.client.connects", "{connect}",
		"Attempts to establish the session on a server, by outcome.")
	t.drops = counter("zkrecipes.client.connection.drops", "{connection}",
		"Established connections that ended (lost, or the session's end).")
	t.reconnects = counter("zkrecipes.client.reconnects", "{reconnect}",
		"Sessions that came back on a new connection after a loss.")
	t.expiries = counter("zkrecipes.client.session.expiries", "{session}",
		"Sessions expired by the server.")
	t.watchEvents = counter("zkrecipes.client.watch.events", "{event}",
		"Watch notifications delivered by the server.")
	t.waitDuration = hist("zkrecipes.wait.duration",
		"Time from the start of an acquisition (Lock, Campaign, Acquire, Take, ...) to its grant.")
	t.waiting = updown("zkrecipes.waiting", "{contender}",
		"Contenders acquiring and not yet granted.")
	t.holdings = updown("zkrecipes.holdings", "{holding}",
		"Holdings held: locks, leaderships, leases, taken items, memberships, registrations.")
	t.abandoned = counter("zkrecipes.abandoned", "{acquisition}",
		"Acquisitions that ended without a grant (TryLock refused, canceled, failed).")
	t.byGrant = counter("zkrecipes.acquisitions.by_grant", "{acquisition}",
		"Acquisitions that held on the previous holder's grant, without reading the queue (zkrecipes.WithGrants).")
	t.losses = counter("zkrecipes.losses", "{holding}",
		"Holdings lost while held, by reason (expired, closed, strict, deleted).")
	t.unconfirmed = counter("zkrecipes.releases.unconfirmed", "{release}",
		"Releases the server did not confirm in time (the node may linger until deleted in the background).")
	t.offered = counter("zkrecipes.items.offered", "{item}",
		"Items added to a queue (Offer).")
	t.taken = counter("zkrecipes.items.taken", "{item}",
		"Items taken from a queue (Take, Poll).")
	t.resyncs = counter("zkrecipes.cache.resyncs", "{resync}",
		"Full re-reads of a cache's tree after a reconnection or a lost connection.")
	sessions, err := m.Int64ObservableUpDownCounter("zkrecipes.client.sessions", metric.WithUnit("{session}"),
		metric.WithDescription("Sessions open (connected or reconnecting) through clients observed by this adapter."))
	check("zkrecipes.client.sessions", err)
	backlog, err := m.Int64ObservableUpDownCounter("zkrecipes.client.event.backlog", metric.WithUnit("{event}"),
		metric.WithDescription("Events queued and not yet read in the open sessions' unbounded queues (state streams, persistent watches)."))
	check("zkrecipes.client.event.backlog", err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b := t.live()
		o.ObserveInt64(sessions, int64(n))
		o.ObserveInt64(backlog, int64(b))
		return nil
	}, sessions, backlog)
	if err != nil {
		return nil, fmt.Errorf("otel: callback of zkrecipes.client.sessions and zkrecipes.client.event.backlog: %w", err)
	}
	return t, nil
}

// live returns the number of open sessions among the clients t was told
// of, and their summed Backlog; it forgets the clients whose session is
// over. It runs at collection time, for the observable instruments.
func (t *Telemetry) live() (sessions, backlog int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.clients {
		select {
		case <-c.Done():
			delete(t.clients, c)
			continue
		default:
		}
		sessions++
		backlog += c.Backlog()
	}
	return sessions, backlog
}

// SessionOptions returns the options that connect a Session's recipes and
// its client to t.
func (t *Telemetry) SessionOptions() []zkrecipes.SessionOption {
	opts := []zkrecipes.SessionOption{zkrecipes.WithObserver(t.RecipeObserver())}
	if o := t.ClientObserver(); o != nil {
		opts = append(opts, zkrecipes.WithClientOptions(zkclient.WithObserver(o)))
	}
	return opts
}

// ClientObserver returns an observer that feeds t's client metrics, for a
// zkclient.Client used without a Session; nil if t makes no metrics. It
// keeps each client it is told of (Opened) until a collection finds its
// session over, to read zkrecipes.client.sessions and
// zkrecipes.client.event.backlog at collection time.
func (t *Telemetry) ClientObserver() *zkclient.Observer {
	if !t.metrics {
		return nil
	}
	ctx := context.Background()
	return &zkclient.Observer{
		Request: func(e zkclient.RequestEvent) {
			t.requestDuration.Record(ctx, e.Latency.Seconds(), t.set(attrKey{kind: opAttrs, a: e.Op}).rec...)
			t.requests.Add(ctx, 1, t.set(attrKey{kind: requestAttrs, a: e.Op, b: zkclient.CodeName(e.Err)}).add...)
			t.bytes.Add(ctx, int64(e.Sent), t.sent.add...)
			t.bytes.Add(ctx, int64(e.Read), t.read.add...)
		},
		Dial:    func(e zkclient.ConnEvent) { t.dials.Add(ctx, 1, t.outcome(e.Err).add...) },
		Connect: func(e zkclient.ConnEvent) { t.connects.Add(ctx, 1, t.outcome(e.Err).add...) },
		Drop:    func(zkclient.ConnEvent) { t.drops.Add(ctx, 1) },
		State: func(e zkclient.StateEvent) {
			switch e.State {
			case zkclient.StateReconnected:
				t.reconnects.Add(ctx, 1)
			case zkclient.StateExpired:
				t.expiries.Add(ctx, 1)
			}
		},
		Watch: func(zkclient.Event) { t.watchEvents.Add(ctx, 1) },
		Opened: func(c *zkclient.Client) {
			t.mu.Lock()
			t.clients[c] = struct{}{}
			t.mu.Unlock()
		},
	}
}

// RecipeObserver returns an observer that feeds t's recipe metrics and
// makes its spans.
func (t *Telemetry) RecipeObserver() *zkrecipes.Observer {
	o := &zkrecipes.Observer{}
	if t.metrics {
		ctx := context.Background()
		o.Queued = func(e zkrecipes.HoldEvent) { t.waiting.Add(ctx, 1, t.recipe(e).add...) }
		o.Granted = func(e zkrecipes.HoldEvent) {
			a := t.recipe(e)
			t.waiting.Add(ctx, -1, a.add...)
			t.holdings.Add(ctx, 1, a.add...)
			t.waitDuration.Record(ctx, e.Wait.Seconds(), a.rec...)
			if e.ByGrant {
				t.byGrant.Add(ctx, 1, a.add...)
			}
		}
		o.Abandoned = func(e zkrecipes.HoldEvent) {
			a := t.recipe(e)
			t.waiting.Add(ctx, -1, a.add...)
			t.abandoned.Add(ctx, 1, a.add...)
		}
		o.Released = func(e zkrecipes.HoldEvent) {
			a := t.recipe(e)
			t.holdings.Add(ctx, -1, a.add...)
			if errors.Is(e.Err, zkrecipes.ErrReleaseUnconfirmed) {
				t.unconfirmed.Add(ctx, 1, a.add...)
			}
		}
		o.Lost = func(e zkrecipes.HoldEvent) {
			t.holdings.Add(ctx, -1, t.recipe(e).add...)
			t.losses.Add(ctx, 1, t.set(attrKey{kind: lossAttrs, a: e.Recipe, b: t.pathLabel(e.Path), c: string(e.Reason)}).add...)
		}
		o.Offered = func(e zkrecipes.ItemEvent) { t.offered.Add(ctx, 1, t.recipeSet(e.Recipe, e.Path).add...) }
		o.Taken = func(e zkrecipes.ItemEvent) { t.taken.Add(ctx, 1, t.recipeSet(e.Recipe, e.Path).add...) }
		o.Resynced = func(e zkrecipes.ResyncEvent) {
			t.resyncs.Add(ctx, 1, t.set(attrKey{kind: pathAttrs, a: t.pathLabel(e.Path)}).add...)
		}
	}
	if t.tracer != nil {
		o.Granted = then(o.Granted, t.waitSpan)
		o.Abandoned = then(o.Abandoned, t.waitSpan)
		o.Released = then(o.Released, func(e zkrecipes.HoldEvent) { t.holdSpan(e, false) })
		o.Lost = then(o.Lost, func(e zkrecipes.HoldEvent) { t.holdSpan(e, true) })
		o.Taken = then(o.Taken, t.takeSpan)
	}
	return o
}

// then returns a func that calls f (if set), then g.
func then[E any](f, g func(E)) func(E) {
	if f == nil {
		return g
	}
	return func(e E) { f(e); g(e) }
}

// recipe returns the attribute set of e's recipe metrics.
func (t *Telemetry) recipe(e zkrecipes.HoldEvent) *attrs {
	return t.recipeSet(e.Recipe, e.Path)
}

// recipeSet returns the attribute set of the recipe metrics of recipe on
// path.
func (t *Telemetry) recipeSet(recipe, path string) *attrs {
	return t.set(attrKey{kind: recipeAttrs, a: recipe, b: t.pathLabel(path)})
}

// set returns key's attribute set, made once.
func (t *Telemetry) set(key attrKey) *attrs {
	if o, ok := t.attrs.Load(key); ok {
		return o.(*attrs)
	}
	var kv []attribute.KeyValue
	switch key.kind {
	case opAttrs:
		kv = []attribute.KeyValue{AttrOp.String(key.a)}
	case requestAttrs:
		kv = []attribute.KeyValue{AttrOp.String(key.a), AttrCode.String(key.b)}
	case recipeAttrs:
		kv = []attribute.KeyValue{AttrRecipe.String(key.a), AttrPath.String(key.b)}
	case lossAttrs:
		kv = []attribute.KeyValue{AttrRecipe.String(key.a), AttrPath.String(key.b), AttrLossReason.String(key.c)}
	case pathAttrs:
		kv = []attribute.KeyValue{AttrPath.String(key.a)}
	}
	o, _ := t.attrs.LoadOrStore(key, newAttrs(kv...))
	return o.(*attrs)
}

func (t *Telemetry) outcome(err error) *attrs {
	if err != nil {
		return t.failed
	}
	return t.ok
}

// waitSpan records the span of an acquisition that ended (Granted or
// Abandoned).
func (t *Telemetry) waitSpan(e zkrecipes.HoldEvent) {
	end := time.Now()
	_, span := t.tracer.Start(parent(e), "zkrecipes."+e.Recipe+".wait",
		trace.WithTimestamp(end.Add(-e.Wait)), trace.WithAttributes(AttrPath.String(e.Path)))
	if e.Err != nil {
		span.SetAttributes(AttrOutcome.String("abandoned"))
		span.RecordError(e.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, e.Err.Error())
	} else {
		span.SetAttributes(AttrOutcome.String("granted"), AttrNode.String(e.Node), AttrAhead.Int(e.Ahead), AttrByGrant.Bool(e.ByGrant))
		if e.Token != 0 {
			span.SetAttributes(AttrToken.Int64(e.Token))
		}
	}
	span.End(trace.WithTimestamp(end))
}

// takeSpan records the span of an item a Queue's Take or Poll took. A
// LockingQueue's taking is its wait span already.
func (t *Telemetry) takeSpan(e zkrecipes.ItemEvent) {
	if e.Recipe != "queue" {
		return
	}
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	end := time.Now()
	_, span := t.tracer.Start(ctx, "zkrecipes.queue.take",
		trace.WithTimestamp(end.Add(-e.Wait)), trace.WithAttributes(AttrPath.String(e.Path)))
	span.End(trace.WithTimestamp(end))
}

// holdSpan records the span of a holding that ended: Lost if lost, else
// Released.
func (t *Telemetry) holdSpan(e zkrecipes.HoldEvent, lost bool) {
	end := time.Now()
	_, span := t.tracer.Start(parent(e), "zkrecipes."+e.Recipe+".hold",
		trace.WithTimestamp(end.Add(-e.Held)), trace.WithAttributes(AttrPath.String(e.Path), AttrNode.String(e.Node)))
	if e.Token != 0 {
		span.SetAttributes(AttrToken.Int64(e.Token))
	}
	if lost {
		span.SetAttributes(AttrOutcome.String("lost"), AttrLossReason.String(string(e.Reason)))
		msg := "lost: " + string(e.Reason)
		if e.Err != nil {
			span.RecordError(e.Err, trace.WithTimestamp(end))
			msg += ": " + e.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	} else {
		span.SetAttributes(AttrOutcome.String("released"))
		if e.Err != nil {
			span.RecordError(e.Err, trace.WithTimestamp(end))
		}
	}
	span.End(trace.WithTimestamp(end))
}

// parent returns the context whose span parents e's spans: the
// acquisition's (a tracer takes only its span; it may be done by now).
func parent(e zkrecipes.HoldEvent) context.Context {
	if e.Context == nil {
		return context.Background()
	}
	return e.Context
}
