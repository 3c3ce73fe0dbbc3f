package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The resources, each on its own path under Options.Base.
const (
	ResMutex     = "mutex"   // plain Mutexes and MultiLocks
	ResLockA     = "mutex-a" // the same (sorted after "mutex": a MultiLock takes that busier one first)
	ResLockB     = "mutex-b" // the same
	ResRW        = "rw"
	ResElection  = "election"
	ResSemaphore = "semaphore"
	ResCache     = "cache" // the subtree the cache writer churns and a Cache follows
	ResNode      = "pnode" // the PersistentNodes' parent
)

// The kinds of workload.
const (
	workMutex     = "mutex"     // a Mutex on one path: Lock, TryLock, Requeue
	workMultiLock = "multilock" // a MultiLock on several paths: Lock, TryLock
	workRW        = "rw"
	workElection  = "election"
	workSemaphore = "semaphore" // Acquire, TryAcquire
)

// work is one workload of a client: a recipe on one or more resources.
type work struct {
	kind string
	res  []string
}

// name is the workload's name in the history: its resource, or, for a
// MultiLock, "multilock(a+b)".
func (w work) name() string {
	if w.kind == workMultiLock {
		return "multilock(" + strings.Join(w.res, "+") + ")"
	}
	return w.res[0]
}

// client is one session slot: a Session through the client's own proxies,
// replaced by a new Session when the server expired it (the recipes never
// reuse an expired session).
type client struct {
	r       *runner
	id      int
	strict  bool
	servers []string // the client's proxies, one per member

	mu  sync.Mutex // held while a new session is made
	cur atomic.Pointer[sessionRef]
}

type sessionRef struct {
	s   *zkrecipes.Session
	gen int32
}

// peek returns the current session without waiting for a new one (nil
// before the first).
func (c *client) peek() *sessionRef { return c.cur.Load() }

// session returns the client's live session, making a new one if the
// current one is over. It retries until ctx ends.
func (c *client) session(ctx context.Context) (*sessionRef, error) {
	if ref := c.cur.Load(); ref != nil && !over(ref.s) {
		return ref, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		ref := c.cur.Load()
		if ref != nil && !over(ref.s) {
			return ref, nil
		}
		if ref != nil {
			ref.s.Close() // expired: free its goroutines; its workloads get errors and come here
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gen := int32(1)
		if ref != nil {
			gen = ref.gen + 1
		}
		opts := []zkrecipes.SessionOption{zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(c.r.o.SessionTimeout))}
		if c.strict {
			opts = append(opts, zkrecipes.WithStrict())
		}
		if gen%2 == 1 {
			// Grant routes taken down soon after their last use, and set
			// up again, under the faults.
			opts = append(opts, zkrecipes.WithGrantLinger(100*time.Millisecond))
		}
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := zkrecipes.NewSession(nctx, c.servers, opts...)
		cancel()
		if err != nil {
			c.r.fail(c.id, gen, "", OpSessionNew, err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		id, _ := s.Credentials()
		c.r.h.Record(Event{Kind: KindSession, Client: c.id, Gen: gen, Session: id, Strict: c.strict, Timeout: s.Timeout()})
		ref = &sessionRef{s: s, gen: gen}
		c.cur.Store(ref)
		c.r.sessions.Add(1)
		go c.watch(ref)
		return ref, nil
	}
}

// watch records how the session ended, and the send time of its newest
// answered request: the server cannot have expired it earlier than that
// plus its timeout.
func (c *client) watch(ref *sessionRef) {
	defer c.r.sessions.Done()
	<-ref.s.Done()
	err := ref.s.Err()
	c.r.h.Record(Event{Kind: KindSessionEnd, Client: c.id, Gen: ref.gen, ErrKind: Classify(err),
		Confirmed: c.r.h.Since(ref.s.Client().Confirmed()), Detail: fmt.Sprint(err)})
}

// retire closes the session of generation gen if it is still the
// current one; the next call to session makes a new one.
func (c *client) retire(gen int32) {
	if ref := c.cur.Load(); ref != nil && ref.gen == gen {
		ref.s.Close()
	}
}

func over(s *zkrecipes.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// grant is one holding as a workload sees it.
type grant struct {
	op      string
	mode    Mode
	token   int64
	lost    <-chan struct{}
	fenced  bool                                      // the holder writes to the resource's register
	release func(ctx context.Context) (string, error) // the release call and its op
	requeue func(ctx context.Context) (*grant, error) // nil if the recipe has none
	// parts are the holdings of a MultiLock, one per path, each with its
	// token; nil for one holding of the workload's resource with token.
	parts []part
}

// part is one path of a MultiLock's holding.
type part struct {
	res   string
	token int64
}

// acquirer makes one attempt to acquire with a recipe value bound to a
// session; it returns the op it tried.
type acquirer func(ctx context.Context, rng *rand.Rand) (*grant, string, error)

// worker runs one workload (one recipe) for one client, in a loop.
type worker struct {
	r    *runner
	c    *client
	w    work
	name string // w.name()
	rng  *rand.Rand

	doing atomic.Pointer[doing] // what the worker is doing, for a run that stalls
}

// doing is a worker's current step: what, and since when (in the
// history's time).
type doing struct {
	what  string
	since time.Duration
}

// set records the worker's current step.
func (w *worker) set(format string, args ...any) {
	w.doing.Store(&doing{what: fmt.Sprintf(format, args...), since: w.r.h.Since(time.Now())})
}

// held is a grant recorded in the history: one holding per part.
type held struct {
	g     *grant
	ids   []int32
	parts []part
}

func (w *worker) run(ctx context.Context) {
	defer w.r.workers.Done()
	w.r.h.Record(Event{Kind: KindWorkload, Client: w.c.id, Res: w.name})
	var gen int32
	var acquire acquirer
	for ctx.Err() == nil {
		w.set("waiting for a session")
		ref, err := w.c.session(ctx)
		if err != nil {
			return
		}
		if ref.gen != gen {
			gen, acquire = ref.gen, w.r.recipe(w.w, w.c.id, ref.s)
		}
		w.step(ctx, acquire, gen)
	}
}

// step acquires once, holds (Requeue-ing sometimes), and releases.
func (w *worker) step(ctx context.Context, acquire acquirer, gen int32) {
	// A third of the attempts give up after 1 to 5 s, so that deadlines
	// also strike during outages (the clean-up of a failed acquire).
	wait := 15 * time.Second
	if w.rng.IntN(3) == 0 {
		wait = w.between(1000, 5000)
	}
	w.set("acquiring on session %d (for up to %v)", gen, wait)
	actx, cancel := context.WithTimeout(ctx, wait)
	g, op, err := acquire(actx, w.rng)
	cancel()
	if err != nil {
		w.set("after %s on session %d failed (%v): checking for orphans, then pausing", op, gen, err)
		if strings.Contains(op, ".try") && errors.Is(err, zkrecipes.ErrLocked) {
			w.r.h.Record(Event{Kind: KindBusy, Client: w.c.id, Gen: gen, Res: w.name, Op: op})
			w.orphans(ctx, gen, op)
			sleep(ctx, w.between(5, 30))
			return
		}
		w.fail(gen, op, err)
		if !errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) {
			w.orphans(ctx, gen, op)
		}
		sleep(ctx, w.between(50, 200))
		return
	}
	for g != nil {
		// One holding in ten is long, so that faults find holders to
		// hit (see runner.awaitHolder).
		long := w.rng.IntN(10) == 0
		w.set("holding after %s on session %d", g.op, gen)
		hd, empty := w.r.granted(w.c.id, gen, w.w, g, long)
		lost := empty || w.use(ctx, hd, gen, long)
		if !lost && ctx.Err() == nil && g.requeue != nil && w.rng.IntN(3) == 0 {
			w.r.released(w.c.id, gen, hd)
			w.set("requeueing on session %d", gen)
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			ng, err := g.requeue(rctx)
			cancel()
			if err != nil {
				w.fail(gen, OpMutexRequeue, err) // it left the queue
				sleep(ctx, w.between(50, 200))
				return
			}
			g = ng
			continue
		}
		w.r.released(w.c.id, gen, hd)
		w.set("releasing on session %d", gen)
		// The release is attempted even after the run is stopped.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.r.o.SessionTimeout+5*time.Second)
		op, err := g.release(rctx)
		cancel()
		if err != nil {
			w.fail(gen, op, err)
		}
		g = nil
	}
	sleep(ctx, w.between(0, 20))
}

// orphans checks that the failed call op left none of its nodes: see
// runner.orphans, with the workload's paths.
func (w *worker) orphans(ctx context.Context, gen int32, op string) {
	var dirs []string
	for _, res := range w.w.res {
		dirs = append(dirs, w.r.o.Base+"/"+res+"/")
	}
	w.r.orphans(ctx, w.c, gen, w.name, dirs, op)
}

// orphans checks that the failed call op of client c's workload name left
// none of its nodes: it asks the server for the session's ephemeral nodes
// under the workload's dirs (prefixes ending in "/"), waiting for the
// session to be connected again if it is not (the call may have failed
// because the link is down), for up to twice the session timeout. Nodes
// still listed zktest.Bound(2 s) after the first answer that shows them are
// left for good: the failed call's clean-up, which may run in the
// background, has given up (a delete may still have been on its way
// before). It tells nothing when the session ends
// meanwhile. A node left is recorded, and the session closed, or it would
// block the others for as long as it lives. (No two workloads of one
// client share a path, so the session's nodes under a workload's paths are
// the workload's.)
func (r *runner) orphans(ctx context.Context, c *client, gen int32, name string, dirs []string, op string) {
	ref := c.peek()
	if ref == nil || ref.gen != gen || over(ref.s) {
		return
	}
	left := zktest.Bound(2 * time.Second)
	deadline := time.Now().Add(2*r.o.SessionTimeout + left)
	var seen time.Time // when nodes were first listed
	for ctx.Err() == nil && time.Now().Before(deadline) {
		ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
		all, err := ref.s.Client().Ephemerals(ectx, r.o.Base)
		cancel()
		if over(ref.s) {
			return
		}
		if err != nil {
			// The link may be down: look again. Any error of no fault
			// kind is the check's own failure.
			if Classify(err) == "" {
				r.fail(c.id, gen, name, OpOrphanCheck, err)
				return
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		var nodes []string
		for _, n := range all {
			for _, dir := range dirs {
				if strings.HasPrefix(n, dir) {
					nodes = append(nodes, n)
				}
			}
		}
		if len(nodes) > 0 && seen.IsZero() {
			seen = time.Now()
		}
		if len(nodes) == 0 || time.Since(seen) >= left {
			r.h.Record(Event{Kind: KindOrphanCheck, Client: c.id, Gen: gen, Res: name, Op: op, Detail: strings.Join(nodes, " ")})
			if len(nodes) > 0 {
				c.retire(gen)
			}
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// fail records a failed call. A release that could not be confirmed
// (from a release, or from the clean-up of a failed acquire or Requeue)
// may leave the node, which stays while the session lives: the session is
// closed then, as documented.
func (w *worker) fail(gen int32, op string, err error) {
	w.r.fail(w.c.id, gen, w.name, op, err)
	if errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) {
		w.c.retire(gen)
	}
}

// use works on the resources while the holding lasts: a few fenced writes
// (one to each path's register) with short sleeps in between (many, over 1
// to 4 s, for a long one), stopping as soon as Lost is seen closed.
// It reports whether the holding was lost.
func (w *worker) use(ctx context.Context, hd *held, gen int32, long bool) bool {
	steps, lo, hi := 1+w.rng.IntN(2), 2, 15
	if w.w.kind == workElection {
		lo, hi = 20, 80 // a leadership lasts a little longer
	}
	if long {
		steps, lo, hi = 15+w.rng.IntN(36), 50, 100 // 1 to 4 s, writing every 75 ms or so
	}
	for range steps {
		select {
		case <-hd.g.lost:
			w.r.lost(w.c.id, gen, hd)
			return true
		default:
		}
		if hd.g.fenced {
			for i, p := range hd.parts {
				if reg := w.r.regs[p.res]; reg != nil {
					reg.Write(w.c.id, gen, hd.ids[i], p.token)
				}
			}
		}
		t := time.NewTimer(w.between(lo, hi))
		select {
		case <-hd.g.lost:
			t.Stop()
			w.r.lost(w.c.id, gen, hd)
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return false
}

// between draws a duration in [lo, hi] milliseconds.
func (w *worker) between(lo, hi int) time.Duration {
	return time.Duration(lo+w.rng.IntN(hi-lo+1)) * time.Millisecond
}

// grantOpts returns client id's way to take grants: WithGrants, the
// default (once its session has waited on the path) or WithoutGrants, in
// turn.
func grantOpts(id int) []zkrecipes.LockOption {
	switch id % 3 {
	case 0:
		return []zkrecipes.LockOption{zkrecipes.WithGrants()}
	case 1:
		return nil
	}
	return []zkrecipes.LockOption{zkrecipes.WithoutGrants()}
}

// recipe returns the acquirer of workload wk for client id on session s:
// a fresh recipe value, bound to that session.
func (r *runner) recipe(wk work, id int, s *zkrecipes.Session) acquirer {
	path := r.o.Base + "/" + wk.res[0]
	switch wk.kind {
	case workMutex:
		// The lines mix the three ways to take grants: from the first
		// Lock, once the session has waited (the default), never.
		m := zkrecipes.NewMutex(s, path, grantOpts(id)...)
		var held func(op string) *grant
		granted := s.Stats().Granted
		held = func(op string) *grant {
			if n := s.Stats().Granted; n > granted {
				r.byGrant.Add(n - granted)
				granted = n
			}
			return &grant{op: op, mode: Exclusive, token: m.Token(), lost: m.Lost(), fenced: true,
				release: func(ctx context.Context) (string, error) { return OpMutexUnlock, m.Unlock(ctx) },
				requeue: func(ctx context.Context) (*grant, error) {
					if err := m.Requeue(ctx); err != nil {
						return nil, err
					}
					return held(OpMutexRequeue), nil
				}}
		}
		return func(ctx context.Context, rng *rand.Rand) (*grant, string, error) {
			op, f := OpMutexLock, m.Lock
			if rng.IntN(5) == 0 {
				op, f = OpMutexTryLock, m.TryLock
			}
			if err := f(ctx); err != nil {
				return nil, op, err
			}
			return held(op), op, nil
		}
	case workMultiLock:
		var paths []string
		for _, res := range wk.res {
			paths = append(paths, r.o.Base+"/"+res)
		}
		m := zkrecipes.NewMultiLock(s, paths)
		return func(ctx context.Context, rng *rand.Rand) (*grant, string, error) {
			op, f := OpMultiLock, m.Lock
			if rng.IntN(5) == 0 {
				op, f = OpMultiTryLock, m.TryLock
			}
			if err := f(ctx); err != nil {
				return nil, op, err
			}
			g := &grant{op: op, mode: Exclusive, lost: m.Lost(), fenced: true,
				release: func(ctx context.Context) (string, error) { return OpMultiUnlock, m.Unlock(ctx) }}
			for i, res := range wk.res {
				g.parts = append(g.parts, part{res: res, token: m.Token(paths[i])})
			}
			return g, op, nil
		}
	case workRW:
		m := zkrecipes.NewRWMutex(s, path, grantOpts(id)...) // as for the Mutexes
		return func(ctx context.Context, rng *rand.Rand) (*grant, string, error) {
			n := rng.IntN(20)
			op, f, mode := OpRWRLock, m.RLock, Shared
			switch {
			case n < 10:
			case n < 12:
				op, f = OpRWTryRLock, m.TryRLock
			case n < 18:
				op, f, mode = OpRWLock, m.Lock, Exclusive
			default:
				op, f, mode = OpRWTryLock, m.TryLock, Exclusive
			}
			if err := f(ctx); err != nil {
				return nil, op, err
			}
			g := &grant{op: op, mode: mode, token: m.Token(), lost: m.Lost(), fenced: mode == Exclusive}
			if mode == Shared {
				g.release = func(ctx context.Context) (string, error) { return OpRWRUnlock, m.RUnlock(ctx) }
			} else {
				g.release = func(ctx context.Context) (string, error) { return OpRWUnlock, m.Unlock(ctx) }
			}
			return g, op, nil
		}
	case workElection:
		e := zkrecipes.NewElection(s, path, fmt.Sprintf("c%d", id), grantOpts(id)...) // as for the Mutexes
		return func(ctx context.Context, _ *rand.Rand) (*grant, string, error) {
			if err := e.Campaign(ctx); err != nil {
				return nil, OpCampaign, err
			}
			return &grant{op: OpCampaign, mode: Exclusive, token: e.Token(), lost: e.Lost(), fenced: true,
				release: func(ctx context.Context) (string, error) { return OpResign, e.Resign(ctx) }}, OpCampaign, nil
		}
	case workSemaphore:
		sem := zkrecipes.NewSemaphore(s, path, r.o.Permits)
		return func(ctx context.Context, rng *rand.Rand) (*grant, string, error) {
			op, f := OpAcquire, sem.Acquire
			if rng.IntN(5) == 0 {
				op, f = OpTryAcquire, sem.TryAcquire
			}
			l, err := f(ctx)
			if err != nil {
				return nil, op, err
			}
			return &grant{op: op, mode: Permit, lost: l.Lost(),
				release: func(ctx context.Context) (string, error) { return OpRelease, l.Release(ctx) }}, op, nil
		}
	}
	panic("nemesis: unknown workload " + wk.kind)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
