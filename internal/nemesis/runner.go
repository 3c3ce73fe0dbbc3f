package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Options configure a Run. The zero values of the numbers are the
// defaults in brackets.
type Options struct {
	Cluster *zktest.Cluster // a running ensemble (3 members)
	Base    string          // the path under which the recipes live; nothing else may use it
	Seed    uint64
	Span    time.Duration // the planned faults' estimated total time [40s]

	Clients int // sessions [7]
	// StrictClients is how many of the clients (the first ones) use strict
	// sessions [5]. Only they run the mutex workload, so that an overlap
	// of mutex holdings is never excused by a server expiry; the others
	// run the read/write lock, the election and the semaphore without
	// strict mode, where an expiry the holder has not yet heard of excuses
	// an overlap (and is counted).
	StrictClients  int
	SessionTimeout time.Duration // [3s]: above zktest.SyncLimit (1s) plus the strict margin
	Permits        int           // the semaphore's [2]
	ProgressBound  time.Duration // [zktest.Bound(30s)]
	Faults         []FaultKind   // the enabled faults [AllFaults]
	Logf           func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Span <= 0 {
		o.Span = 40 * time.Second
	}
	if o.Clients <= 0 {
		o.Clients = 7
	}
	if o.StrictClients <= 0 {
		o.StrictClients = min(5, o.Clients)
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 3 * time.Second
	}
	if o.Permits <= 0 {
		o.Permits = 2
	}
	if o.ProgressBound <= 0 {
		o.ProgressBound = zktest.Bound(30 * time.Second)
	}
	if len(o.Faults) == 0 {
		o.Faults = AllFaults
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Result is a finished run.
type Result struct {
	Seed    uint64
	Plan    []Fault
	Events  []Event
	Config  Config // what Check was given
	Report  Report
	Wall    time.Duration
	Summary string
}

// Explain returns the violations vs (of r.Report), each with the timeline
// around it: the first max in full, the rest one line each.
func (r *Result) Explain(vs []Violation, max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations (rerun with -nemesis.seed %d)\n", r.Seed, len(vs), r.Seed)
	for i, v := range vs {
		b.WriteString(v.String() + "\n")
		if i < max {
			b.WriteString(Timeline(r.Events, v, 3*time.Second, 120))
		}
	}
	return b.String()
}

// runner is one run's state.
type runner struct {
	o       Options
	h       *History
	cluster *zktest.Cluster
	members int
	proxies [][]*zktest.Proxy // [client][member]
	member  map[string]int    // proxy address → member
	clients []*client
	regs    map[string]*Register
	user    *userRun // nil for the project's workloads

	workers  sync.WaitGroup
	sessions sync.WaitGroup // session watchers

	// Closed by healAll; by the cache writer once it stopped after the
	// heal; by the cache follower once it recorded the final snapshot.
	healed, writerQuiet, cacheFinal chan struct{}
	nodesQuiet                      sync.WaitGroup // the PersistentNode keepers that have not stopped changing their nodes
	nodeClients                     []int          // the clients that keep a PersistentNode

	dataQuiet     sync.WaitGroup     // the counters and producers that have not stopped after the heal
	consumers     sync.WaitGroup     // the queue consumers
	stopConsumers context.CancelFunc // ends the consumers' context, after the drain

	adminMu sync.Mutex
	admin   *zkclient.Client // the runner's own, straight to the members (see adminClient)

	byGrant atomic.Int64 // Mutex acquisitions held on a grant (WithGrants)

	mu        sync.Mutex
	seq       int32
	live      map[int32]liveHolding
	workloads []workloadKey
	acquired  map[workloadKey]bool    // a non-empty grant since the last mark
	lockers   map[workloadKey]*worker // the workers of the lock workloads, for dumpQueues

	sup supervisors // the supervised election's (supervised.go)
}

type liveHolding struct {
	client int
	res    string
	long   bool
}

// disarmOpcode is an operation code no client sends: arming a proxy's trap
// with it disarms the trap armed before.
const disarmOpcode = math.MinInt32

// Run runs the workloads on the cluster while the seeded plan's faults
// happen, then heals everything, waits for every workload to acquire
// again, closes the sessions, scans for leftover nodes and checks the
// history. The error is for a run that could not be carried out (a member
// that would not restart, a failed proxy); what the run found is in the
// Result's Report.
func Run(ctx context.Context, o Options) (*Result, error) { return run(ctx, o, nil) }

// run is Run, or RunUser with the user's workload u.
func run(ctx context.Context, o Options, u *userRun) (*Result, error) {
	o = o.withDefaults()
	start := time.Now()
	mutexClients := o.StrictClients
	if u != nil {
		// Every client runs the user's workload, strict or not.
		mutexClients, o.StrictClients = o.Clients, 0
		if u.o.Strict {
			o.StrictClients = o.Clients
		}
	}
	r := &runner{
		o: o, h: NewHistory(), cluster: o.Cluster, members: len(o.Cluster.Addrs()), user: u,
		member: map[string]int{}, regs: map[string]*Register{},
		live: map[int32]liveHolding{}, acquired: map[workloadKey]bool{}, lockers: map[workloadKey]*worker{},
		healed: make(chan struct{}), writerQuiet: make(chan struct{}), cacheFinal: make(chan struct{}),
	}
	plan := NewPlan(PlanConfig{
		Seed: o.Seed, Span: o.Span, Clients: o.Clients, MutexClients: mutexClients, Members: r.members,
		SessionTimeout: o.SessionTimeout, StrictMargin: o.SessionTimeout / 2, Faults: o.Faults,
	})
	o.Logf("nemesis: seed %d, %d clients (%d strict), session timeout %v, faults on: %v; plan of %d faults:",
		o.Seed, o.Clients, o.StrictClients, o.SessionTimeout, o.Faults, len(plan))
	for i, f := range plan {
		o.Logf("  %2d. %v", i+1, f)
	}
	defer r.closeProxies()
	defer func() {
		if r.admin != nil {
			r.admin.Close()
		}
	}()
	if err := r.setUp(); err != nil {
		return nil, err
	}
	work, stop := context.WithCancel(ctx)
	defer stop()
	if u != nil {
		u.start(work, r)
	} else {
		r.startWorkloads(work)
	}

	// Warm up: every workload acquires once before the first fault.
	r.waitAcquired(ctx, zktest.Bound(30*time.Second))
	var runErr error
	for i, f := range plan {
		if err := r.apply(ctx, i, f); err != nil {
			runErr = fmt.Errorf("nemesis: fault %d (%v): %w", i+1, f, err)
			break
		}
	}
	if err := r.healAll(ctx); err != nil && runErr == nil {
		runErr = err
	}
	close(r.healed)
	if runErr == nil && u != nil {
		r.waitAcquired(ctx, o.ProgressBound+zktest.Bound(2*time.Second))
	} else if runErr == nil {
		nodes, data := make(chan struct{}), make(chan struct{})
		go func() { r.checkNodes(ctx, r.nodeClients); close(nodes) }()
		go func() { r.finishData(ctx); close(data) }()
		if !r.waitAcquired(ctx, o.ProgressBound+zktest.Bound(2*time.Second)) {
			r.dumpQueues(ctx)
		}
		<-nodes
		<-data
		select {
		case <-r.cacheFinal:
		case <-time.After(o.ProgressBound + zktest.Bound(5*time.Second)):
		case <-ctx.Done():
		}
	}
	stop()
	r.workers.Wait()
	if u != nil {
		close(u.done)
	}
	for _, c := range r.clients {
		if ref := c.peek(); ref != nil {
			if err := ref.s.Close(); err != nil {
				r.fail(c.id, ref.gen, "", OpSessionClose, err)
			}
		}
	}
	r.sessions.Wait()
	if runErr == nil && u == nil {
		runErr = r.removeTree(ctx)
	}
	if runErr == nil {
		runErr = r.scan(ctx)
	}
	// The slack is zktest's syncLimit x tickTime: how long a follower cut
	// off from its leader may go on answering.
	cfg := Config{Permits: map[string]int{ResSemaphore: o.Permits}, ProgressBound: o.ProgressBound, ExpirySlack: zktest.SyncLimit}
	res := &Result{Seed: o.Seed, Plan: plan, Events: r.h.Events(), Config: cfg, Wall: time.Since(start)}
	if u != nil {
		res.Config.Permits = u.o.Permits
		res.Report = CheckUser(res.Events, res.Config)
		res.Summary = UserSummary(o.Seed, len(plan), res.Wall, res.Events, res.Report)
		return res, runErr
	}
	res.Report = Check(res.Events, cfg)
	res.Summary = Summary(o.Seed, len(plan), res.Wall, res.Report) + fmt.Sprintf(" mutex-by-grant=%d", r.byGrant.Load())
	return res, runErr
}

// setUp makes each client's proxies, one per member, and the registers.
func (r *runner) setUp() error {
	for id := range r.o.Clients {
		var ps []*zktest.Proxy
		var addrs []string
		for m := range r.members {
			p, err := zktest.NewProxy(r.cluster.Addr(m))
			if err != nil {
				return err
			}
			r.member[p.Addr()] = m
			ps = append(ps, p)
			addrs = append(addrs, p.Addr())
		}
		r.proxies = append(r.proxies, ps)
		r.clients = append(r.clients, &client{r: r, id: id, strict: id < r.o.StrictClients, servers: addrs})
	}
	if r.user != nil {
		return nil
	}
	for _, res := range []string{ResMutex, ResLockA, ResLockB, ResRW, ResElection} {
		r.regs[res] = NewRegister(r.h, res)
	}
	return nil
}

func (r *runner) closeProxies() {
	for _, ps := range r.proxies {
		for _, p := range ps {
			p.Close()
		}
	}
}

// layout assigns the workloads to the clients. Every client runs the
// read/write lock, the election and the semaphore. The strict clients (the
// first ones) also run the mutual exclusion workloads, so that an overlap
// of their holdings is never excused by a server expiry: each a plain
// Mutex (every one of them, so that each can send the multi of a Requeue
// that a CutAfterRequest waits for), on three paths ("mutex", "mutex-a",
// "mutex-b"), and two of every five a MultiLock, on overlapping sets of
// those paths ({mutex, mutex-a}, {mutex-a, mutex-b}), which they share with
// the plain Mutexes of other clients. No client has two workloads on one
// path (the orphan check counts the session's nodes under a workload's
// paths as the workload's). Of the last three clients, the third from last and the
// second from last keep a PersistentNode each, the second from last
// churns the cache's subtree, and the last follows it with a Cache.
func layout(clients, strict int) (works [][]work, writer, cache int, nodes []int) {
	plain := []string{ResMutex, ResMutex, ResLockA, ResLockB, ResMutex}
	multi := map[int][]string{3: {ResMutex, ResLockA}, 4: {ResLockA, ResLockB}}
	for c := range clients {
		var ws []work
		if c < strict {
			ws = append(ws, work{kind: workMutex, res: []string{plain[c%5]}})
			if m, ok := multi[c%5]; ok {
				ws = append(ws, work{kind: workMultiLock, res: m})
			}
		}
		ws = append(ws, work{kind: workRW, res: []string{ResRW}}, work{kind: workElection, res: []string{ResElection}},
			work{kind: workSemaphore, res: []string{ResSemaphore}})
		works = append(works, ws)
	}
	writer, cache = -1, -1
	if clients >= 3 {
		writer, cache = clients-2, clients-1
		nodes = []int{clients - 3, clients - 2}
	}
	return works, writer, cache, nodes
}

// startWorkloads starts each client's workloads (see layout).
func (r *runner) startWorkloads(ctx context.Context) {
	works, writer, cache, nodes := layout(r.o.Clients, r.o.StrictClients)
	r.nodeClients = nodes
	for _, c := range r.clients {
		for i, wk := range works[c.id] {
			w := &worker{r: r, c: c, w: wk, name: wk.name(),
				rng: rand.New(rand.NewPCG(r.o.Seed, uint64(c.id)<<8|uint64(i)))}
			r.mu.Lock()
			r.workloads = append(r.workloads, workloadKey{c.id, w.name})
			r.lockers[workloadKey{c.id, w.name}] = w
			r.mu.Unlock()
			r.workers.Add(1)
			go w.run(ctx)
		}
	}
	r.startSupervised(ctx)
	rng := func(c, i int) *rand.Rand { return rand.New(rand.NewPCG(r.o.Seed, uint64(c)<<8|uint64(0x80+i))) }
	if writer >= 0 {
		r.workers.Add(2)
		go r.treeWriter(ctx, r.clients[writer], rng(writer, 0))
		go r.cacheFollower(ctx, r.clients[cache])
	} else {
		close(r.writerQuiet)
		close(r.cacheFinal)
	}
	cctx, stopConsumers := context.WithCancel(ctx)
	r.stopConsumers = stopConsumers
	for c, kinds := range dataLayout(r.o.Clients) {
		for i, kind := range kinds {
			w := &dataWorker{r: r, c: r.clients[c], kind: kind, rng: rng(c, 2+i)}
			r.workers.Add(1)
			if isConsumer(kind) {
				r.consumers.Add(1)
				go func() { defer r.consumers.Done(); w.run(cctx) }()
			} else {
				r.dataQuiet.Add(1)
				go w.run(ctx)
			}
		}
	}
	for i, c := range nodes {
		r.nodesQuiet.Add(1)
		r.workers.Add(1)
		go r.nodeKeeper(ctx, r.clients[c], r.clients[nodes[(i+1)%len(nodes)]], rng(c, 1))
	}
}

// granted records a grant, one holding per part, and returns it, and
// whether Lost was already closed (the holding is empty).
func (r *runner) granted(client int, gen int32, wk work, g *grant, long bool) (*held, bool) {
	parts := g.parts
	if parts == nil {
		parts = []part{{res: wk.res[0], token: g.token}}
	}
	workName := ""
	if wk.kind == workMultiLock {
		workName = wk.name()
	}
	hd := &held{g: g, parts: parts}
	empty := isClosed(g.lost)
	for _, p := range parts {
		r.mu.Lock()
		r.seq++
		id := r.seq
		r.mu.Unlock()
		hd.ids = append(hd.ids, id)
		r.h.Record(Event{Kind: KindGrant, Client: client, Gen: gen, Res: p.res, Work: workName, Mode: g.mode, Holding: id, Token: p.token, Op: g.op, Empty: empty})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !empty {
		for i, p := range parts {
			r.live[hd.ids[i]] = liveHolding{client, p.res, long}
		}
		r.acquired[workloadKey{client, wk.name()}] = true
	}
	return hd, empty
}

func (r *runner) lost(client int, gen int32, hd *held) {
	for i, p := range hd.parts {
		r.h.Record(Event{Kind: KindLost, Client: client, Gen: gen, Res: p.res, Holding: hd.ids[i]})
	}
}

func (r *runner) released(client int, gen int32, hd *held) {
	for i, p := range hd.parts {
		r.h.Record(Event{Kind: KindRelease, Client: client, Gen: gen, Res: p.res, Holding: hd.ids[i]})
	}
	r.mu.Lock()
	for _, id := range hd.ids {
		delete(r.live, id)
	}
	r.mu.Unlock()
}

// nextID returns a new id, unique among holdings and caches.
func (r *runner) nextID() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq
}

func (r *runner) fail(client int, gen int32, res, op string, err error) {
	r.h.Record(Event{Kind: KindError, Client: client, Gen: gen, Res: res, Op: op, ErrKind: Classify(err), Detail: err.Error()})
}

// waitAcquired clears the marks and waits until every workload acquired
// since, or d passed; it reports whether they all did.
func (r *runner) waitAcquired(ctx context.Context, d time.Duration) bool {
	r.mu.Lock()
	clear(r.acquired)
	r.mu.Unlock()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		all := true
		for _, w := range r.workloads {
			all = all && r.acquired[w]
		}
		r.mu.Unlock()
		if all {
			return true
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return false
}

// dumpQueues records, for a run whose workloads did not all make
// progress, what each recipe's path holds and whose nodes they are, and
// what each lock workload that has not acquired is doing (as KindQueue
// events: progress puts them in its violations).
func (r *runner) dumpQueues(ctx context.Context) {
	r.mu.Lock()
	for k, w := range r.lockers {
		if d := w.doing.Load(); d != nil && !r.acquired[k] {
			r.h.Record(Event{Kind: KindQueue, Client: k.client, Res: k.res,
				Detail: fmt.Sprintf("its worker at the end of the wait: %s, since %.3fs", d.what, d.since.Seconds())})
		}
	}
	r.mu.Unlock()
	owners := map[int64]string{}
	for _, e := range r.h.Events() {
		if e.Kind == KindSession {
			owners[e.Session] = fmt.Sprintf("c%d/%d", e.Client, e.Gen)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := zkclient.Connect(cctx, r.cluster.Addrs(), zkclient.WithSessionTimeout(10*time.Second))
	if err != nil {
		return
	}
	defer admin.Close()
	for dir := range r.dirs() {
		kids, _, err := admin.Children(cctx, dir)
		if err != nil || len(kids) == 0 {
			continue
		}
		slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[max(0, len(a)-10):], b[max(0, len(b)-10):]) })
		var parts []string
		for _, k := range kids {
			st, ok, err := admin.Exists(cctx, dir+"/"+k)
			if err != nil || !ok {
				continue
			}
			who := owners[st.EphemeralOwner]
			if who == "" {
				who = fmt.Sprintf("0x%x", st.EphemeralOwner)
			}
			parts = append(parts, fmt.Sprintf("%s (%s, created at zxid 0x%x)", k, who, st.Czxid))
		}
		r.h.Record(Event{Kind: KindQueue, Client: -1, Detail: dir + " holds " + strings.Join(parts, ", ")})
	}
}

// apply carries out one fault and heals it, then waits for its gap.
func (r *runner) apply(ctx context.Context, i int, f Fault) error {
	start := func(format string, args ...any) {
		r.h.Record(Event{Kind: KindFault, Client: -1, Detail: f.Kind.String() + " " + fmt.Sprintf(format, args...)})
	}
	end := ""
	var err error
	T := r.o.SessionTimeout
	switch f.Kind {
	case KillMember, PauseMember:
		if f.Target == TargetHolder {
			r.awaitHolder(ctx, -1)
		}
	case LoseQuorum:
	default:
		r.awaitHolder(ctx, f.Client)
	}
	switch f.Kind {
	case KillMember:
		m := r.resolve(ctx, f.Target, f.Member)
		start("member %d (%v) with SIGKILL for %v", m, f.Target, f.Duration)
		if err = r.cluster.Kill(m); err == nil {
			sleep(ctx, f.Duration)
			err = r.restart(ctx, m)
		}
	case PauseMember:
		m := r.resolve(ctx, f.Target, f.Member)
		start("member %d (%v) with SIGSTOP for %v", m, f.Target, f.Duration)
		if err = r.cluster.Pause(m); err == nil {
			sleep(ctx, f.Duration)
			err = r.cluster.Resume(m)
		}
	case LoseQuorum:
		ms := []int{f.Member, f.Other}
		if f.Stall {
			start("members %v with SIGSTOP for %v", ms, f.Duration)
			for _, m := range ms {
				err = errors.Join(err, r.cluster.Pause(m))
			}
			sleep(ctx, f.Duration)
			for _, m := range ms {
				err = errors.Join(err, r.cluster.Resume(m))
			}
		} else {
			start("members %v with SIGKILL for %v", ms, f.Duration)
			for _, m := range ms {
				err = errors.Join(err, r.cluster.Kill(m))
			}
			sleep(ctx, f.Duration)
			// Restart both at once (either makes a quorum with the
			// member still running, and a restart returns once its
			// member serves).
			errs := make(chan error, len(ms))
			for _, m := range ms {
				go func() { errs <- r.restart(ctx, m) }()
			}
			for range ms {
				err = errors.Join(err, <-errs)
			}
		}
	case CutOff:
		how := "refused"
		if f.Stall {
			how = "blackholed"
		}
		start("client %d: every link %s for %v (session timeout %v)", f.Client, how, f.Duration, T)
		for _, p := range r.proxies[f.Client] {
			if f.Stall {
				p.Blackhole()
			} else {
				p.Refuse(true)
				p.Cut()
			}
		}
		sleep(ctx, f.Duration)
		for _, p := range r.proxies[f.Client] {
			p.Refuse(false)
			p.Pass()
		}
	case BlackholeLink:
		p, m := r.currentProxy(f.Client)
		how := "blackholed"
		if f.Stall {
			how = "paused"
		}
		start("client %d: its link to member %d %s for %v", f.Client, m, how, f.Duration)
		if f.Stall {
			p.Pause()
		} else {
			p.Blackhole()
		}
		sleep(ctx, f.Duration)
		p.Pass()
	case DelayClient:
		start("client %d: every link delayed %v each way for %v (strict margin %v)", f.Client, f.Delay, f.Duration, T/2)
		for _, p := range r.proxies[f.Client] {
			p.Delay(f.Delay)
		}
		sleep(ctx, f.Duration)
		for _, p := range r.proxies[f.Client] {
			p.Pass()
		}
	case CutAfterRequest:
		start("client %d: cut after its next %s (forwarded=%v)", f.Client, opcodeNames[f.Opcode], f.Forward)
		cases := make([]<-chan struct{}, 0, r.members)
		for _, p := range r.proxies[f.Client] {
			p.CutOnRequest(f.Opcode, f.Forward)
			cases = append(cases, p.Tripped())
		}
		tripped := waitAny(ctx, cases, f.Duration)
		for _, p := range r.proxies[f.Client] {
			p.CutOnRequest(disarmOpcode, false)
		}
		if tripped >= 0 {
			end = fmt.Sprintf("tripped on the link to member %d", tripped)
		} else {
			end = "not tripped"
		}
	case ForceExpiry:
		ref := r.clients[f.Client].peek()
		if ref == nil {
			start("client %d: no session yet", f.Client)
			break
		}
		id, pw := ref.s.Credentials()
		r.h.Record(Event{Kind: KindForcedExpiry, Client: f.Client, Gen: ref.gen, Session: id})
		start("client %d: session 0x%x (generation %d) expired on purpose", f.Client, id, ref.gen)
		end = r.expire(ctx, id, pw) + r.expireSupervisor(ctx, f.Client)
		sleep(ctx, 500*time.Millisecond)
	case SlowThenStall:
		start("client %d: every link delayed %v each way for %v, then its member stalled for %v", f.Client, f.Delay, f.Lead, f.Duration)
		for _, p := range r.proxies[f.Client] {
			p.Delay(f.Delay)
		}
		sleep(ctx, f.Lead)
		_, m := r.currentProxy(f.Client)
		end = fmt.Sprintf("stalled member %d", m)
		if err = r.cluster.Pause(m); err == nil {
			sleep(ctx, f.Duration)
			err = r.cluster.Resume(m)
		}
		for _, p := range r.proxies[f.Client] {
			p.Pass()
		}
	default:
		return fmt.Errorf("unknown fault kind %v", f.Kind)
	}
	r.h.Record(Event{Kind: KindFaultEnd, Client: -1, Detail: strings.TrimSpace(f.Kind.String() + " " + end)})
	r.o.Logf("nemesis: %2d. %v healed %s", i+1, f.Kind, end)
	if err != nil {
		return err
	}
	sleep(ctx, f.Gap)
	return ctx.Err()
}

// awaitHolder waits, for up to 4 s, until client c (any client if c < 0:
// then on the mutex) is in a long holding, so that the fault hits a
// holder. It only chooses the moment a fault starts, never what the fault
// is.
func (r *runner) awaitHolder(ctx context.Context, c int) {
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		found := false
		for _, h := range r.live {
			if h.long && (h.client == c || c < 0 && (h.res == ResMutex || r.user != nil)) {
				found = true
				break
			}
		}
		r.mu.Unlock()
		if found {
			return
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// resolve finds the member a member fault hits, without drawing from the
// plan's generator: the leader, or the member of the lowest client holding
// the mutex (else the leader), or fallback.
func (r *runner) resolve(ctx context.Context, t Target, fallback int) int {
	if t == TargetHolder {
		r.mu.Lock()
		holder, long := -1, false
		for _, h := range r.live {
			// The lowest client in a long holding, else the lowest.
			if (h.res == ResMutex || r.user != nil) && (holder < 0 || h.long && !long || h.long == long && h.client < holder) {
				holder, long = h.client, h.long
			}
		}
		r.mu.Unlock()
		if holder >= 0 {
			if ref := r.clients[holder].peek(); ref != nil {
				if m, ok := r.member[ref.s.Server()]; ok {
					return m
				}
			}
		}
		t = TargetLeader
	}
	if t == TargetLeader {
		for m := range r.members {
			mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			mode, err := r.cluster.Mode(mctx, m)
			cancel()
			if err == nil && mode == "leader" {
				return m
			}
		}
	}
	return fallback
}

// currentProxy returns the proxy of the link client c is using, and its
// member.
func (r *runner) currentProxy(c int) (*zktest.Proxy, int) {
	addr := ""
	if ref := r.clients[c].peek(); ref != nil {
		addr = ref.s.Server()
	}
	for m, p := range r.proxies[c] {
		if p.Addr() == addr {
			return p, m
		}
	}
	return r.proxies[c][0], 0
}

// restart starts a killed member again, trying thrice.
func (r *runner) restart(ctx context.Context, m int) error {
	var err error
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = r.cluster.Restart(rctx, m)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// expire ends a session on a member that answers, and says how it went.
func (r *runner) expire(ctx context.Context, id int64, pw []byte) string {
	var errs []string
	for m := range r.members {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := zktest.ExpireSession(ectx, r.cluster.Addr(m), id, pw)
		cancel()
		switch {
		case err == nil:
			return fmt.Sprintf("expired through member %d", m)
		case errors.Is(err, zktest.ErrNoSession):
			return "the session was already gone"
		}
		errs = append(errs, err.Error())
	}
	return "not expired: " + strings.Join(errs, "; ")
}

// waitAny waits up to d for one of chans to close and returns its index,
// or -1.
func waitAny(ctx context.Context, chans []<-chan struct{}, d time.Duration) int {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for i, ch := range chans {
			if isClosed(ch) {
				return i
			}
		}
		sleep(ctx, 5*time.Millisecond)
	}
	return -1
}

// healAll undoes every fault: proxies pass and accept, traps are disarmed,
// members run. The progress clock starts when it is done.
func (r *runner) healAll(ctx context.Context) error {
	for _, ps := range r.proxies {
		for _, p := range ps {
			p.Refuse(false)
			p.CutOnRequest(disarmOpcode, false)
			p.Pass()
		}
	}
	var err error
	for m := range r.members {
		if r.cluster.Running(m) {
			err = errors.Join(err, r.cluster.Resume(m))
		} else {
			err = errors.Join(err, r.restart(ctx, m))
		}
	}
	r.h.Record(Event{Kind: KindHealed, Client: -1, Detail: "every proxy passes, every member runs"})
	return err
}

// scan waits, once every session is closed, until nothing is left under
// Base but the recipes' own directories (containers, which the server
// removes in its own time), and records what is left. A container cannot be
// told from a persistent node by its Stat (ZooKeeper shows both with
// ephemeralOwner 0), so the directories are known by name: a recipe's path,
// and the semaphore's locks and leases.
func (r *runner) scan(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, zktest.Bound(30*time.Second))
	defer cancel()
	admin, err := zkclient.Connect(cctx, r.cluster.Addrs(), zkclient.WithSessionTimeout(zktest.Bound(10*time.Second)))
	if err != nil {
		return fmt.Errorf("nemesis: leftover scan: %w", err)
	}
	defer admin.Close()
	// A session whose close was not confirmed leaves its nodes until the
	// server expires it.
	deadline := time.Now().Add(r.o.SessionTimeout + zktest.Bound(10*time.Second))
	for {
		left, n, err := walk(cctx, admin, r.o.Base, r.leftover())
		if err == nil && (len(left) == 0 || time.Now().After(deadline)) {
			r.h.Record(Event{Kind: KindScan, Client: -1, Detail: fmt.Sprintf("%d nodes under %s", n, r.o.Base)})
			for _, l := range left {
				r.h.Record(Event{Kind: KindLeftover, Client: -1, Detail: l})
			}
			return nil
		}
		if err != nil && time.Now().After(deadline) {
			return fmt.Errorf("nemesis: leftover scan: %w", err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// leftover returns what the scan reports: in the project's run, every
// node but the recipes' directories; in a user's, see userLeftover.
func (r *runner) leftover() func(p string, st zkclient.Stat) bool {
	if r.user != nil {
		return userLeftover
	}
	dirs := r.dirs()
	return func(p string, _ zkclient.Stat) bool {
		return !dirs[p] && !(strings.HasSuffix(path.Dir(p), ".grants") && dirs[path.Dir(p)])
	}
}

// dirs returns the recipes' directories under Base.
func (r *runner) dirs() map[string]bool {
	d := map[string]bool{}
	for _, res := range []string{ResMutex, ResLockA, ResLockB, ResRW, ResElection, ResSemaphore, ResNode, ResPromote, ResQueue, ResLQueue, ResSupervised} {
		d[r.o.Base+"/"+res] = true
		// Its grants directory (a Mutex's, an Election's, an
		// RWMutex's, the supervised one's or the queue's lock: grants
		// are on by default once a session waits), whose children are
		// directories too, one per session: containers, which the
		// server removes only at its container check.
		d[r.o.Base+"/"+res+".grants"] = true
	}
	d[r.o.Base+"/"+ResSemaphore+"/locks"] = true
	d[r.o.Base+"/"+ResSemaphore+"/leases"] = true
	return d
}

// walk lists every node below p that is left (as left tells), and counts
// the nodes it looked at.
func walk(ctx context.Context, c *zkclient.Client, p string, isLeft func(string, zkclient.Stat) bool) (left []string, n int, err error) {
	kids, _, err := c.Children(ctx, p)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(kids)
	for _, k := range kids {
		q := p + "/" + k
		st, ok, err := c.Exists(ctx, q)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			continue
		}
		n++
		if isLeft(q, st) {
			left = append(left, fmt.Sprintf("%s (ephemeralOwner 0x%x)", q, st.EphemeralOwner))
		}
		l, m, err := walk(ctx, c, q, isLeft)
		if err != nil {
			return nil, 0, err
		}
		left, n = append(left, l...), n+m
	}
	return left, n, nil
}

// waitQuiet waits until the workloads counted by quiet have stopped
// changing their data, or deadline passes, and reports true; false if ctx
// was done first. Until quiet's count is zero, a goroutine waits for it.
func waitQuiet(ctx context.Context, quiet *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() { quiet.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
	case <-ctx.Done():
		return false
	}
	return true
}
