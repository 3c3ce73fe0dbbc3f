// Package prometheus exports the metrics of zkrecipes sessions and their
// clients to Prometheus, through the observers of the zkclient and
// zkrecipes packages.
//
//	m, err := prometheus.New(prom.DefaultRegisterer, prometheus.Options{})
//	...
//	s, err := zkrecipes.Connect(ctx, servers, m.SessionOptions()...)
//
// One Metrics may serve any number of sessions: their counts add up. Its
// labels are bounded: request metrics are labelled by operation and
// outcome code, recipe metrics by recipe kind and by a path label that
// Options.PathLabel derives from the recipe's path (by default the same
// value, "all", for every path: raw paths would give one series per lock).
//
// The metrics and suggested alerts are described in docs/metrics.md.
package prometheus

import (
	"errors"
	"sync"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Options configures Metrics.
type Options struct {
	// Namespace prefixes every metric name (default "zkrecipes").
	Namespace string

	// PathLabel maps a recipe's path to the value of the "path" label. It
	// must return few distinct values (a prefix, a lock's role); by
	// default every path is "all".
	PathLabel func(path string) string

	// Buckets are the histograms' bucket bounds, in seconds (default
	// prometheus.DefBuckets, 5ms to 10s).
	Buckets []float64
}

// Metrics holds the collectors, registered on the Registerer given to
// [New], and the observers that feed them.
type Metrics struct {
	pathLabel func(string) string

	requestSeconds *prom.HistogramVec // op
	requests       *prom.CounterVec   // op, code
	bytes          *prom.CounterVec   // direction
	dials          *prom.CounterVec   // outcome
	connects       *prom.CounterVec   // outcome
	drops          prom.Counter
	reconnects     prom.Counter
	expiries       prom.Counter
	watchEvents    prom.Counter

	waitSeconds *prom.HistogramVec // recipe, path
	waiting     *prom.GaugeVec     // recipe, path
	holdings    *prom.GaugeVec     // recipe, path
	abandoned   *prom.CounterVec   // recipe, path
	byGrant     *prom.CounterVec   // recipe, path
	losses      *prom.CounterVec   // recipe, path, reason
	unconfirmed *prom.CounterVec   // recipe, path
	offered     *prom.CounterVec   // recipe, path
	taken       *prom.CounterVec   // recipe, path
	resyncs     *prom.CounterVec   // path

	mu      sync.Mutex
	clients map[*zkclient.Client]struct{} // told by Opened; forgotten at a scrape once done
}

// New creates the metrics and registers them on reg.
func New(reg prom.Registerer, opts Options) (*Metrics, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = "zkrecipes"
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = prom.DefBuckets
	}
	m := &Metrics{pathLabel: opts.PathLabel, clients: make(map[*zkclient.Client]struct{})}
	if m.pathLabel == nil {
		m.pathLabel = func(string) string { return "all" }
	}
	recipe := []string{"recipe", "path"}
	m.requestSeconds = prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Subsystem: "client", Name: "request_duration_seconds",
		Help: "Time from a ZooKeeper request's call to its end, by operation.", Buckets: buckets}, []string{"op"})
	m.requests = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "requests_total",
		Help: "ZooKeeper requests ended, by operation and outcome code."}, []string{"op", "code"})
	m.bytes = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "bytes_total",
		Help: "Bytes of request (sent) and reply (read) frames."}, []string{"direction"})
	m.dials = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "dials_total",
		Help: "Network connections attempted to a ZooKeeper server, by outcome."}, []string{"outcome"})
	m.connects = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "connects_total",
		Help: "Attempts to establish the session on a server, by outcome."}, []string{"outcome"})
	m.drops = prom.NewCounter(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "connection_drops_total",
		Help: "Established connections that ended (lost, or the session's end)."})
	m.reconnects = prom.NewCounter(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "reconnects_total",
		Help: "Sessions that came back on a new connection after a loss."})
	m.expiries = prom.NewCounter(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "session_expiries_total",
		Help: "Sessions expired by the server."})
	m.watchEvents = prom.NewCounter(prom.CounterOpts{Namespace: ns, Subsystem: "client", Name: "watch_events_total",
		Help: "Watch notifications delivered by the server."})
	m.waitSeconds = prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: "wait_seconds",
		Help: "Time from the start of an acquisition (Lock, Campaign, Acquire, Take, ...) to its grant.", Buckets: buckets}, recipe)
	m.waiting = prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "waiting",
		Help: "Contenders acquiring and not yet granted."}, recipe)
	m.holdings = prom.NewGaugeVec(prom.GaugeOpts{Namespace: ns, Name: "holdings",
		Help: "Holdings held: locks, leaderships, leases, taken items, memberships, registrations."}, recipe)
	m.abandoned = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "abandoned_total",
		Help: "Acquisitions that ended without a grant (TryLock refused, canceled, failed)."}, recipe)
	m.byGrant = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "acquisitions_by_grant_total",
		Help: "Acquisitions that held on the previous holder's grant, without reading the queue (zkrecipes.WithGrants)."}, recipe)
	m.losses = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "losses_total",
		Help: "Holdings lost while held, by reason (expired, closed, strict, deleted)."}, append(recipe, "reason"))
	m.unconfirmed = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "releases_unconfirmed_total",
		Help: "Releases the server did not confirm in time (the node may linger until deleted in the background)."}, recipe)
	m.offered = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "items_offered_total",
		Help: "Items added to a queue (Offer)."}, recipe)
	m.taken = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "items_taken_total",
		Help: "Items taken from a queue (Take, Poll)."}, recipe)
	m.resyncs = prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: "cache_resyncs_total",
		Help: "Full re-reads of a cache's tree after a reconnection or a lost connection."}, []string{"path"})
	sessions := prom.NewGaugeFunc(prom.GaugeOpts{Namespace: ns, Subsystem: "client", Name: "sessions",
		Help: "Sessions open (connected or reconnecting) through clients observed by these metrics."},
		func() float64 { n, _ := m.live(); return float64(n) })
	backlog := prom.NewGaugeFunc(prom.GaugeOpts{Namespace: ns, Subsystem: "client", Name: "event_backlog",
		Help: "Events queued and not yet read in the open sessions' unbounded queues (state streams, persistent watches)."},
		func() float64 { _, b := m.live(); return float64(b) })
	for _, c := range []prom.Collector{m.requestSeconds, m.requests, m.bytes, m.dials, m.connects, m.drops,
		m.reconnects, m.expiries, m.watchEvents, m.waitSeconds, m.waiting, m.holdings, m.abandoned, m.byGrant, m.losses, m.unconfirmed,
		m.offered, m.taken, m.resyncs, sessions, backlog} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SessionOptions returns the options that connect a Session's recipes and
// its client to m.
func (m *Metrics) SessionOptions() []zkrecipes.SessionOption {
	return []zkrecipes.SessionOption{
		zkrecipes.WithObserver(m.RecipeObserver()),
		zkrecipes.WithClientOptions(zkclient.WithObserver(m.ClientObserver())),
	}
}

// ClientObserver returns an observer that feeds m's client metrics, for a
// zkclient.Client used without a Session.
func (m *Metrics) ClientObserver() *zkclient.Observer {
	return &zkclient.Observer{
		Request: func(e zkclient.RequestEvent) {
			m.requestSeconds.WithLabelValues(e.Op).Observe(e.Latency.Seconds())
			m.requests.WithLabelValues(e.Op, zkclient.CodeName(e.Err)).Inc()
			m.bytes.WithLabelValues("sent").Add(float64(e.Sent))
			m.bytes.WithLabelValues("read").Add(float64(e.Read))
		},
		Dial:    func(e zkclient.ConnEvent) { m.dials.WithLabelValues(outcome(e.Err)).Inc() },
		Connect: func(e zkclient.ConnEvent) { m.connects.WithLabelValues(outcome(e.Err)).Inc() },
		Drop:    func(zkclient.ConnEvent) { m.drops.Inc() },
		State: func(e zkclient.StateEvent) {
			switch e.State {
			case zkclient.StateReconnected:
				m.reconnects.Inc()
			case zkclient.StateExpired:
				m.expiries.Inc()
			}
		},
		Watch: func(zkclient.Event) { m.watchEvents.Inc() },
		Opened: func(c *zkclient.Client) {
			m.mu.Lock()
			m.clients[c] = struct{}{}
			m.mu.Unlock()
		},
	}
}

// live returns the number of open sessions among the clients m was told
// of, and their summed Backlog; it forgets the clients whose session is
// over. It runs at scrape time, for the gauges.
func (m *Metrics) live() (sessions, backlog int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.clients {
		select {
		case <-c.Done():
			delete(m.clients, c)
			continue
		default:
		}
		sessions++
		backlog += c.Backlog()
	}
	return sessions, backlog
}

// RecipeObserver returns an observer that feeds m's recipe metrics.
func (m *Metrics) RecipeObserver() *zkrecipes.Observer {
	labels := func(e zkrecipes.HoldEvent) (string, string) { return e.Recipe, m.pathLabel(e.Path) }
	return &zkrecipes.Observer{
		Queued: func(e zkrecipes.HoldEvent) { m.waiting.WithLabelValues(labels(e)).Inc() },
		Granted: func(e zkrecipes.HoldEvent) {
			r, p := labels(e)
			m.waiting.WithLabelValues(r, p).Dec()
			m.holdings.WithLabelValues(r, p).Inc()
			m.waitSeconds.WithLabelValues(r, p).Observe(e.Wait.Seconds())
			if e.ByGrant {
				m.byGrant.WithLabelValues(r, p).Inc()
			}
		},
		Abandoned: func(e zkrecipes.HoldEvent) {
			r, p := labels(e)
			m.waiting.WithLabelValues(r, p).Dec()
			m.abandoned.WithLabelValues(r, p).Inc()
		},
		Released: func(e zkrecipes.HoldEvent) {
			r, p := labels(e)
			m.holdings.WithLabelValues(r, p).Dec()
			if errors.Is(e.Err, zkrecipes.ErrReleaseUnconfirmed) {
				m.unconfirmed.WithLabelValues(r, p).Inc()
			}
		},
		Lost: func(e zkrecipes.HoldEvent) {
			r, p := labels(e)
			m.holdings.WithLabelValues(r, p).Dec()
			m.losses.WithLabelValues(r, p, string(e.Reason)).Inc()
		},
		Offered:  func(e zkrecipes.ItemEvent) { m.offered.WithLabelValues(e.Recipe, m.pathLabel(e.Path)).Inc() },
		Taken:    func(e zkrecipes.ItemEvent) { m.taken.WithLabelValues(e.Recipe, m.pathLabel(e.Path)).Inc() },
		Resynced: func(e zkrecipes.ResyncEvent) { m.resyncs.WithLabelValues(m.pathLabel(e.Path)).Inc() },
	}
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
