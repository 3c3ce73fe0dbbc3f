package nemesis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The data recipes' resources, each on its own path under Options.Base.
const (
	ResAtomic  = "along"         // an AtomicLong
	ResShared  = "scount"        // a SharedCount (seed 0)
	ResPromote = "along-promote" // the AtomicLong's promotion mutex
	ResQueue   = "queue"         // a Queue (Curator's names)
	ResLQueue  = "lqueue"        // a LockingQueue
)

// The outcomes of a data call that did not succeed.
const (
	outcomeUnconfirmed = "unconfirmed" // ErrWriteUnconfirmed: it may or may not have been applied
	outcomeFailed      = "failed"      // any other error: not applied
)

func outcome(err error) string {
	if errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
		return outcomeUnconfirmed
	}
	return outcomeFailed
}

// The kinds of data workload.
const (
	dataAtomic   = "atomic"   // AtomicLong.Add
	dataPromoted = "promoted" // AtomicLong.Add WithPromotion(…, 2)
	dataShared   = "shared"   // SharedCount: Count, then TrySetCount until one applies
	dataOffer    = "offer"    // Queue.Offer
	dataTake     = "take"     // Queue.Take, or Poll
	dataLQOffer  = "lqoffer"  // LockingQueue.Offer
	dataLQTake   = "lqtake"   // LockingQueue.Take, then Consume (or, one time in five, Release)
)

// isConsumer tells whether a data workload takes from a queue: consumers
// go on after the heal until the queues are drained.
func isConsumer(kind string) bool { return kind == dataTake || kind == dataLQTake }

// dataLayout assigns the data workloads to clients: counters on three
// clients (one AtomicLong with promotion), a producer and a consumer of
// each queue on others, so that every queue has two producers and two or
// three consumers.
func dataLayout(clients int) [][]string {
	plan := [][]string{
		{dataPromoted, dataTake},
		{dataShared, dataLQOffer},
		{dataOffer, dataLQTake},
		{dataLQOffer},
		{dataLQTake},
		{dataOffer, dataLQTake},
		{dataAtomic, dataShared, dataTake},
	}
	out := make([][]string, clients)
	copy(out, plan)
	return out
}

// dataWorker runs one data workload for one client.
type dataWorker struct {
	r    *runner
	c    *client
	kind string
	rng  *rand.Rand
	n    int // items offered, for their data
}

func (w *dataWorker) between(lo, hi int) time.Duration {
	return time.Duration(lo+w.rng.IntN(hi-lo+1)) * time.Millisecond
}

// timeout draws how long a call may take: a third of them give up after
// 1 to 3 s, so that deadlines strike during outages too.
func (w *dataWorker) timeout() time.Duration {
	if w.rng.IntN(3) == 0 {
		return w.between(1000, 3000)
	}
	return 10 * time.Second
}

// run works until ctx ends; producers and counters stop changing data at
// the heal (recording KindQuiet), consumers go on until the runner stops
// them (ctx is then theirs, cancelled after the drain).
func (w *dataWorker) run(ctx context.Context) {
	defer w.r.workers.Done()
	if !isConsumer(w.kind) {
		defer sync.OnceFunc(w.r.dataQuiet.Done)()
	}
	var gen int32
	var step func(ctx context.Context, gen int32)
	for ctx.Err() == nil {
		if !isConsumer(w.kind) && isClosed(w.r.healed) {
			w.r.h.Record(Event{Kind: KindQuiet, Client: w.c.id, Res: w.res()})
			return
		}
		ref, err := w.c.session(ctx)
		if err != nil {
			return
		}
		if ref.gen != gen {
			gen, step = ref.gen, w.bind(ref.s)
		}
		step(ctx, gen)
	}
}

func (w *dataWorker) res() string {
	switch w.kind {
	case dataAtomic, dataPromoted:
		return ResAtomic
	case dataShared:
		return ResShared
	case dataOffer, dataTake:
		return ResQueue
	}
	return ResLQueue
}

// bind returns the workload's step with recipe values bound to session s.
func (w *dataWorker) bind(s *zkrecipes.Session) func(ctx context.Context, gen int32) {
	r, id, res := w.r, w.c.id, w.res()
	path := r.o.Base + "/" + res
	switch w.kind {
	case dataAtomic, dataPromoted, dataShared:
		op, add := OpAtomicAdd, func(ctx context.Context, d int64) (int64, error) { return 0, nil }
		switch w.kind {
		case dataAtomic:
			a := zkrecipes.NewAtomicLong(s, path)
			add = a.Add
		case dataPromoted:
			a := zkrecipes.NewAtomicLong(s, path, zkrecipes.WithPromotion(r.o.Base+"/"+ResPromote, 2))
			add = a.Add
		case dataShared:
			op = OpSharedAdd
			sc := zkrecipes.NewSharedCount(s, path, 0)
			add = func(ctx context.Context, d int64) (int64, error) {
				for {
					v, err := sc.Count(ctx)
					if err != nil {
						return 0, err
					}
					next := v.Value + int32(d)
					ok, err := sc.TrySetCount(ctx, next, v)
					if err != nil || ok {
						return int64(next), err
					}
				}
			}
		}
		return func(ctx context.Context, gen int32) {
			d := int64(1 + w.rng.IntN(1000))
			actx, cancel := context.WithTimeout(ctx, w.timeout())
			v, err := add(actx, d)
			cancel()
			e := Event{Kind: KindCounter, Client: id, Gen: gen, Res: res, Op: op, Token: d, Value: v, Accepted: err == nil}
			if err != nil {
				e.ErrKind, e.Value, e.Detail = outcome(err), 0, err.Error()
				r.fail(id, gen, res, op, err)
			}
			r.h.Record(e)
			sleep(ctx, w.between(50, 150))
		}
	case dataOffer, dataLQOffer:
		op, offer := OpOffer, zkrecipes.NewQueue(s, path).Offer
		if w.kind == dataLQOffer {
			op, offer = OpLQOffer, zkrecipes.NewLockingQueue(s, path).Offer
		}
		return func(ctx context.Context, gen int32) {
			w.n++
			data := fmt.Sprintf("c%d-%s-%d", id, res, w.n)
			octx, cancel := context.WithTimeout(ctx, w.timeout())
			err := offer(octx, []byte(data))
			cancel()
			e := Event{Kind: KindOffer, Client: id, Gen: gen, Res: res, Op: op, Data: data, Accepted: err == nil}
			if err != nil {
				e.ErrKind, e.Detail = outcome(err), err.Error()
				r.fail(id, gen, res, op, err)
			}
			r.h.Record(e)
			sleep(ctx, w.between(100, 300)) // well below what the consumers take

		}
	case dataTake:
		q := zkrecipes.NewQueue(s, path)
		return func(ctx context.Context, gen int32) {
			op := OpTake
			tctx, cancel := context.WithTimeout(ctx, w.timeout())
			var data []byte
			var err error
			if w.rng.IntN(4) == 0 {
				op = OpPoll
				var ok bool
				if data, ok, err = q.Poll(tctx); err == nil && !ok {
					cancel()
					sleep(ctx, w.between(20, 60))
					return // empty
				}
			} else {
				data, err = q.Take(tctx)
			}
			cancel()
			switch {
			case err == nil:
				r.h.Record(Event{Kind: KindTake, Client: id, Gen: gen, Res: res, Op: op, Data: string(data), Accepted: true})
			case errors.Is(err, zkrecipes.ErrWriteUnconfirmed):
				r.h.Record(Event{Kind: KindTake, Client: id, Gen: gen, Res: res, Op: op, Data: string(data), ErrKind: outcomeUnconfirmed, Detail: err.Error()})
				fallthrough
			default:
				r.fail(id, gen, res, op, err)
			}
			sleep(ctx, w.between(0, 30))
		}
	case dataLQTake:
		q := zkrecipes.NewLockingQueue(s, path)
		return func(ctx context.Context, gen int32) { w.lqTake(ctx, gen, q) }
	}
	panic("nemesis: unknown data workload " + w.kind)
}

// lqTake takes one item of the LockingQueue, holds it while it works on
// it (a few milliseconds; one time in twenty 1 to 3 s, so that faults find
// holders), and consumes it, or gives it back one time in five (never
// once it saw Lost close: then it calls Consume, which says whether the
// item is still its own). The item
// is recorded as a holding of the resource "lqueue/<item>", with one
// permit, so that the exclusion check finds two consumers that worked on
// one item at once without the first having seen its Lost close.
func (w *dataWorker) lqTake(ctx context.Context, gen int32, q *zkrecipes.LockingQueue) {
	r, id := w.r, w.c.id
	tctx, cancel := context.WithTimeout(ctx, w.timeout())
	it, err := q.Take(tctx)
	cancel()
	locks := []string{r.o.Base + "/" + ResLQueue + "/taken/"}
	if err != nil {
		r.fail(id, gen, ResLQueue, OpLQTake, err)
		r.orphans(ctx, w.c, gen, ResLQueue, locks, OpLQTake)
		sleep(ctx, w.between(20, 100))
		return
	}
	data := string(it.Data())
	res := ResLQueue + "/" + data
	hid := r.nextID()
	lost := isClosed(it.Lost())
	r.h.Record(Event{Kind: KindGrant, Client: id, Gen: gen, Res: res, Mode: Permit, Holding: hid, Op: OpLQTake, Empty: lost})
	work := w.between(2, 30)
	if w.rng.IntN(20) == 0 {
		work = w.between(1000, 3000)
	}
	if !lost {
		t := time.NewTimer(work)
		select {
		case <-it.Lost():
			lost = true
			r.h.Record(Event{Kind: KindLost, Client: id, Gen: gen, Res: res, Holding: hid})
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	r.h.Record(Event{Kind: KindRelease, Client: id, Gen: gen, Res: res, Holding: hid})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.SessionTimeout+5*time.Second)
	defer cancel()
	if !lost && w.rng.IntN(5) == 0 {
		if err := it.Release(rctx); err != nil {
			r.fail(id, gen, ResLQueue, OpLQRelease, err)
			// Given back in the background if not confirmed: the lock
			// must go while the session lives.
			r.orphans(ctx, w.c, gen, ResLQueue, locks, OpLQRelease)
		}
		return
	}
	err = it.Consume(rctx)
	e := Event{Kind: KindConsume, Client: id, Gen: gen, Res: ResLQueue, Op: OpLQConsume, Data: data, Holding: hid, Accepted: err == nil}
	if err != nil {
		// Refused because the lock was lost: certainly not consumed by
		// this consumer. Any other error may have come after the
		// transaction was applied.
		e.ErrKind, e.Detail = outcomeUnconfirmed, err.Error()
		if errors.Is(err, zkrecipes.ErrNodeLost) {
			e.ErrKind = outcomeFailed
		}
		r.fail(id, gen, ResLQueue, OpLQConsume, err)
	}
	r.h.Record(e)
	if errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) {
		// The lock goes in the background, or with the session: closed
		// now, as for a lock's unconfirmed release.
		w.c.retire(gen)
		return
	}
	if err != nil {
		// The lock must be gone (or another session's), as Lost promises
		// ("once it is closed another consumer may take the item"). This
		// consumer holds one item at a time: any lock of its session is
		// this one.
		r.orphans(ctx, w.c, gen, ResLQueue, locks, OpLQConsume)
	}
}

// finishData runs after the heal: once the counters and producers are
// quiet it records the counters' values, waits (up to ProgressBound) for
// the consumers to drain both queues, stops them, and records what the
// queues still hold.
func (r *runner) finishData(ctx context.Context) {
	deadline := time.Now().Add(r.o.ProgressBound)
	waitQuiet(ctx, &r.dataQuiet, deadline)
	defer r.stopConsumers()
	admin, err := r.adminClient(ctx)
	if err != nil {
		return
	}
	read := func(p string) ([]byte, bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := admin.Sync(rctx, p); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return nil, false, err
		}
		data, _, err := admin.Get(rctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil, false, nil
		}
		return data, err == nil, err
	}
	for _, res := range []string{ResAtomic, ResShared} {
		data, ok, err := read(r.o.Base + "/" + res)
		e := Event{Kind: KindCounterValue, Client: -1, Res: res, Accepted: err == nil}
		switch {
		case err != nil:
			e.Detail = err.Error()
		case ok && len(data) == 8:
			e.Value = int64(binary.BigEndian.Uint64(data))
		case ok && len(data) == 4:
			e.Value = int64(int32(binary.BigEndian.Uint32(data)))
		case ok && len(data) != 0:
			e.Accepted, e.Detail = false, fmt.Sprintf("%d bytes", len(data))
		}
		r.h.Record(e)
	}
	dirs := map[string]string{ResQueue: r.o.Base + "/" + ResQueue, ResLQueue: r.o.Base + "/" + ResLQueue + "/entries"}
	list := func(dir string) ([]string, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := admin.Sync(rctx, dir); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return nil, err
		}
		kids, _, err := admin.Children(rctx, dir)
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil, nil
		}
		slices.Sort(kids)
		return kids, err
	}
	drained := map[string]bool{}
	for ctx.Err() == nil {
		all := true
		for res, dir := range dirs {
			kids, err := list(dir)
			drained[res] = err == nil && len(kids) == 0
			all = all && drained[res]
		}
		if all || !time.Now().Before(deadline) {
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	r.stopConsumers()
	r.consumers.Wait()
	for _, res := range []string{ResQueue, ResLQueue} {
		kids, err := list(dirs[res])
		e := Event{Kind: KindQueueScan, Client: -1, Res: res, Accepted: drained[res]}
		if err != nil {
			e.Accepted, e.Detail = false, err.Error()
		}
		for _, k := range kids {
			if !strings.HasPrefix(k, "qn-") && !strings.HasPrefix(k, "entry-") {
				continue
			}
			data, _, _ := read(dirs[res] + "/" + k)
			left := Event{Kind: KindQueueLeft, Client: -1, Res: res, Path: dirs[res] + "/" + k, Data: string(data)}
			if res == ResLQueue {
				left.Detail = r.lockOwner(ctx, admin, r.o.Base+"/"+ResLQueue+"/taken/"+k)
			}
			r.h.Record(left)
		}
		r.h.Record(e)
	}
}

// lockOwner says who holds the LockingQueue lock at p: "unlocked", or
// "locked by session 0x… (c<client>/<generation>, live|over)".
func (r *runner) lockOwner(ctx context.Context, admin *zkclient.Client, p string) string {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, ok, err := admin.Exists(rctx, p)
	switch {
	case err != nil:
		return "lock unknown: " + err.Error()
	case !ok:
		return "unlocked"
	}
	who := "of no client"
	for _, e := range r.h.Events() {
		if e.Kind == KindSession && e.Session == st.EphemeralOwner {
			who = fmt.Sprintf("c%d/%d", e.Client, e.Gen)
			if ref := r.clients[e.Client].peek(); ref != nil && ref.gen == e.Gen && !over(ref.s) {
				who += ", a live session"
			}
		}
	}
	return fmt.Sprintf("locked by session 0x%x (%s)", st.EphemeralOwner, who)
}
