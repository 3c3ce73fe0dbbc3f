// Package bench holds the lock workloads that both the Go benchmarks and
// the zkr command measure: zkrecipes' Mutex, (in internal/gozk, through
// RunContender) go-zookeeper/zk's own Lock,
// the floors (a chain of sessions that each wait for their predecessor's
// deletion, then delete their own node: one delete and one event per
// handoff, and with floor+listing one listing too, the read a safe handoff
// needs; see floor.go) and, for the herd demonstration only, a naive lock
// whose waiters all watch the parent's children. RunReads measures many
// small reads on one session, zkclient against go-zookeeper/zk (through
// RunReadsWith).
package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one run.
type Config struct {
	Servers      []string
	Path         string        // lock path, used by this run only
	Contenders   int           // sessions contending at once
	Acquisitions int           // total acquisitions (handoffs for the floor)
	Timeout      time.Duration // session timeout (default 30s)
	// Chain measures handoff time as the floor does: contenders queued in
	// advance, each unlocking as soon as it holds, none queueing again.
	Chain    bool
	Progress func(done int) // called after each acquisition, if set
	// Requests, if set, reads the servers' own request counters (see
	// [ServerRequests]); the run reads them just before and after what it
	// times and reports the difference in Result.ServerReads and
	// ServerWrites.
	Requests func(context.Context) (Requests, error)
}

// Result is what one run measured.
type Result struct {
	Recipe       string        `json:"recipe"`
	Chain        bool          `json:"chain,omitempty"` // measured as a chain (see Config.Chain)
	Contenders   int           `json:"contenders"`
	Acquisitions int           `json:"acquisitions"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	PerSecond    float64       `json:"acquisitions_per_second"`
	Handoff      time.Duration `json:"handoff_ns"` // elapsed / acquisitions
	WaitP50      time.Duration `json:"wait_p50_ns"`
	WaitP99      time.Duration `json:"wait_p99_ns"`
	// Per acquisition; negative when the recipe cannot be observed.
	Listings float64 `json:"listings_per_acquisition"`
	Reads    float64 `json:"reads_per_acquisition"`
	Events   float64 `json:"watch_events_per_acquisition"`
	// Watch events delivered per release that had a waiter.
	EventsPerRelease   float64 `json:"watch_events_per_release"`
	ListingsPerRelease float64 `json:"listings_per_release"`
	// The requests the servers answered during the timed part, by their
	// own count (Config.Requests), per acquisition; -1 when not counted.
	// They include the requests of anything else using the servers then,
	// and the sessions' pings.
	ServerReads  float64 `json:"server_reads_per_acquisition"`
	ServerWrites float64 `json:"server_writes_per_acquisition"`

	waits []time.Duration // each acquisition's wait, for Merge
}

// Recipes names the workloads Run knows. Those on go-zookeeper/zk
// ("go-zookeeper", its Lock, and "floor-go-zookeeper", the floor on it) live
// in the module internal/gozk, which runs them through [RunContender] and
// [RunFloor], so that neither the library nor zkr links go-zookeeper/zk.
var Recipes = []string{"zkrecipes", "zkrecipes-requeue", "zkrecipes-grant", "zkrecipes-grant-requeue", "floor", "floor+listing", "naive"}

// Run runs the named workload.
func Run(ctx context.Context, recipe string, cfg Config) (Result, error) {
	cfg, err := cfg.check()
	if err != nil {
		return Result{}, err
	}
	var c contender
	switch recipe {
	case "zkrecipes":
		c = ours{}
	case "zkrecipes-requeue":
		c = ours{requeue: true}
	case "zkrecipes-grant":
		c = ours{grants: true}
	case "zkrecipes-grant-requeue":
		c = ours{grants: true, requeue: true}
	case "naive":
		c = naive{}
	case "floor":
		return runFloor(ctx, recipe, cfg, dialZkcFloor, false)
	case "floor+listing":
		return runFloor(ctx, recipe, cfg, dialZkcFloor, true)
	default:
		return Result{}, fmt.Errorf("bench: unknown recipe %q (want one of %v)", recipe, Recipes)
	}
	return runContender(ctx, recipe, c, cfg)
}

// check refuses a run without contenders or acquisitions and sets the
// default timeout.
func (cfg Config) check() (Config, error) {
	if cfg.Contenders < 1 || cfg.Acquisitions < 1 {
		return cfg, fmt.Errorf("bench: need at least one contender and one acquisition (got %d, %d)", cfg.Contenders, cfg.Acquisitions)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	return cfg, nil
}

// runContender runs c's loop, or its chain with cfg.Chain.
func runContender(ctx context.Context, recipe string, c contender, cfg Config) (Result, error) {
	if cfg.Chain {
		if strings.HasSuffix(recipe, "-requeue") {
			return Result{}, fmt.Errorf("bench: %s does not release, so it cannot run as a chain", recipe)
		}
		return runChain(ctx, recipe, c, cfg)
	}
	return runLoop(ctx, recipe, c, cfg)
}

// contender is a lock implementation under test.
type contender interface {
	open(ctx context.Context, cfg Config) (client, error)
}

// client is one session's lock, with its counters. A client whose unlock
// queues again at once (Mutex.Requeue) holds when its loop ends; finish
// releases it.
type client interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	finish(ctx context.Context) error
	counts() counts
	sessionID() int64
	close()
}

type counts struct {
	listings, reads, events int64 // -1: not observable
}

// fleet is the clients of one run, with their counts when it started.
type fleet struct {
	clients []client
	before  []counts
}

// openFleet opens cfg.Contenders clients of c; on error none stays open.
func openFleet(ctx context.Context, c contender, cfg Config) (*fleet, error) {
	f := &fleet{}
	for range cfg.Contenders {
		cl, err := c.open(ctx, cfg)
		if err != nil {
			f.close()
			return nil, err
		}
		f.clients = append(f.clients, cl)
		f.before = append(f.before, cl.counts())
	}
	return f, nil
}

// rebase makes counted count from now.
func (f *fleet) rebase() {
	for i, cl := range f.clients {
		f.before[i] = cl.counts()
	}
}

// counted sums what the clients counted since the fleet was opened, or
// since rebase.
func (f *fleet) counted() counts {
	var sum counts
	for i, cl := range f.clients {
		a, b := cl.counts(), f.before[i]
		sum.listings = addKnown(sum.listings, a.listings, b.listings)
		sum.reads = addKnown(sum.reads, a.reads, b.reads)
		sum.events = addKnown(sum.events, a.events, b.events)
	}
	return sum
}

func (f *fleet) close() {
	for _, cl := range f.clients {
		cl.close()
	}
}

// runLoop has every contender lock and unlock in a loop until the run's
// acquisitions are used up. Before the timed loop, each contender takes and
// releases the lock once, one after the other: the first Lock of a session
// on a new path pays once for what later ones reuse (the path's parents,
// with grants the session's grants directory and its watch), which would
// otherwise weigh on a short run with many contenders, and on some
// workloads more than others.
func runLoop(ctx context.Context, recipe string, c contender, cfg Config) (Result, error) {
	f, err := openFleet(ctx, c, cfg)
	if err != nil {
		return Result{}, err
	}
	defer f.close()
	clients := f.clients
	for _, cl := range clients {
		if err := cl.lock(ctx); err != nil {
			return Result{}, fmt.Errorf("%s: first lock: %w", recipe, err)
		}
		if err := cl.unlock(ctx); err != nil {
			return Result{}, fmt.Errorf("%s: first unlock: %w", recipe, err)
		}
		if err := cl.finish(ctx); err != nil {
			return Result{}, fmt.Errorf("%s: first release: %w", recipe, err)
		}
	}
	f.rebase()

	var (
		budget   atomic.Int64
		done     atomic.Int64
		mu       sync.Mutex
		waits    = make([]time.Duration, 0, cfg.Acquisitions)
		firstErr error
		wg       sync.WaitGroup
	)
	budget.Store(int64(cfg.Acquisitions))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	m := newMeter(cfg)
	m.start(ctx)
	start := time.Now()
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for budget.Add(-1) >= 0 {
				t0 := time.Now()
				if err := cl.lock(ctx); err != nil {
					fail(fmt.Errorf("%s: lock: %w", recipe, err))
					return
				}
				w := time.Since(t0)
				if err := cl.unlock(ctx); err != nil {
					fail(fmt.Errorf("%s: unlock: %w", recipe, err))
					return
				}
				mu.Lock()
				waits = append(waits, w)
				mu.Unlock()
				n := done.Add(1)
				if cfg.Progress != nil {
					cfg.Progress(int(n))
				}
			}
			if err := cl.finish(ctx); err != nil {
				fail(fmt.Errorf("%s: release: %w", recipe, err))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return Result{}, firstErr
	}
	m.stop(ctx)
	sum := f.counted()
	n := float64(cfg.Acquisitions)
	// Every release but the last of the run had someone waiting, when
	// there was more than one contender.
	releases := n - 1
	if cfg.Contenders == 1 || releases < 1 {
		releases = n
	}
	r := Result{
		Recipe:             recipe,
		Contenders:         cfg.Contenders,
		Acquisitions:       cfg.Acquisitions,
		Elapsed:            elapsed,
		PerSecond:          n / elapsed.Seconds(),
		Handoff:            elapsed / time.Duration(cfg.Acquisitions),
		Listings:           perOrUnknown(sum.listings, n),
		Reads:              perOrUnknown(sum.reads, n),
		Events:             perOrUnknown(sum.events, n),
		EventsPerRelease:   perOrUnknown(sum.events, releases),
		ListingsPerRelease: perOrUnknown(sum.listings, releases),
	}
	r.ServerReads, r.ServerWrites = m.per(n)
	r.waits = waits
	r.WaitP50, r.WaitP99 = percentile(waits, 0.50), percentile(waits, 0.99)
	return r, nil
}

// addKnown adds after-before to sum; -1 anywhere means "not observable".
func addKnown(sum, after, before int64) int64 {
	if sum < 0 || after < 0 || before < 0 {
		return -1
	}
	return sum + after - before
}

func perOrUnknown(v int64, n float64) float64 {
	if v < 0 {
		return -1
	}
	return float64(v) / n
}

// Merge combines runs of one workload (one recipe, contender count and
// mode), measured apart, into the result of one run of them all: times and
// acquisitions add up, per-acquisition and per-release figures are averaged
// weighted by each run's acquisitions, and the wait percentiles are those of
// all the waits.
func Merge(runs ...Result) Result {
	if len(runs) == 0 {
		return Result{}
	}
	m := Result{Recipe: runs[0].Recipe, Chain: runs[0].Chain, Contenders: runs[0].Contenders}
	for _, r := range runs {
		m.Elapsed += r.Elapsed
		m.Acquisitions += r.Acquisitions
		m.waits = append(m.waits, r.waits...)
	}
	n := float64(m.Acquisitions)
	avg := func(field func(Result) float64) float64 {
		var sum float64
		for _, r := range runs {
			if field(r) < 0 {
				return -1 // not observable
			}
			sum += field(r) * float64(r.Acquisitions)
		}
		return sum / n
	}
	m.Listings = avg(func(r Result) float64 { return r.Listings })
	m.Reads = avg(func(r Result) float64 { return r.Reads })
	m.Events = avg(func(r Result) float64 { return r.Events })
	m.EventsPerRelease = avg(func(r Result) float64 { return r.EventsPerRelease })
	m.ListingsPerRelease = avg(func(r Result) float64 { return r.ListingsPerRelease })
	m.ServerReads = avg(func(r Result) float64 { return r.ServerReads })
	m.ServerWrites = avg(func(r Result) float64 { return r.ServerWrites })
	m.PerSecond = n / m.Elapsed.Seconds()
	m.Handoff = m.Elapsed / time.Duration(m.Acquisitions)
	m.WaitP50, m.WaitP99 = percentile(m.waits, 0.50), percentile(m.waits, 0.99)
	return m
}

// Interleave returns the order in which to measure recipes in rounds slices
// each: every round runs each recipe once, in an order that rotates from
// round to round, so that a server whose speed drifts during the runs (its
// JIT compiler, its log, the disk) favours none of them.
func Interleave(recipes []string, rounds int) []string {
	order := make([]string, 0, rounds*len(recipes))
	for r := range rounds {
		for i := range recipes {
			order = append(order, recipes[(i+r)%len(recipes)])
		}
	}
	return order
}

// MergeEach merges the results of each of recipes (see Merge), in the order
// of recipes.
func MergeEach(results []Result, recipes []string) []Result {
	merged := make([]Result, 0, len(recipes))
	for _, recipe := range recipes {
		var runs []Result
		for _, r := range results {
			if r.Recipe == recipe {
				runs = append(runs, r)
			}
		}
		merged = append(merged, Merge(runs...))
	}
	return merged
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	i := int(p * float64(len(d)-1))
	return d[i]
}

// Warm runs a throwaway workload so the server's JIT compiler has compiled
// the request paths before anything is measured: on a fresh JVM the first
// workload measured would otherwise pay for the warm-up and look slower.
// It runs the floor, then zkrecipes' Mutex; WarmWith runs others.
func Warm(ctx context.Context, servers []string, path string) error {
	return WarmWith(ctx, servers, path, Run, "floor", "zkrecipes")
}

// WarmWith warms the server up as Warm does, with each of recipes run by
// run (Run, or a runner that knows more workloads).
func WarmWith(ctx context.Context, servers []string, path string, run func(context.Context, string, Config) (Result, error), recipes ...string) error {
	for _, recipe := range recipes {
		if _, err := run(ctx, recipe, Config{Servers: servers, Path: path + "/" + recipe, Contenders: 10, Acquisitions: 3000}); err != nil {
			return fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	return nil
}
