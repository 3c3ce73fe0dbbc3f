package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The supervised election (issue 25): some clients also run
// zkrecipes.RunWhileLeader on ResSupervised, whose work is recorded as a
// holding: granted when the work starts (with HeldToken's token), ended
// when the work notices its context cancelled (KindLost, unless the run is
// stopping) or returns (KindRelease, which also marks the return). A work
// whose context was not yet cancelled counts as
// running, so the exclusion check finds a supervisor that let its work
// run on after the leadership could have passed to another; twiceCheck
// finds a supervisor that started the work again before the previous
// run returned.
//
// A supervisor owns its sessions (made through its client's proxies, so
// the client's link faults hit them too, strict if the client is): they
// are recorded as the sessions of a client of their own, SupervisorClient,
// so that the checker's excuses (an expiry the nemesis forced, one the
// server decided) apply to them as to any. A forced expiry of a client
// also expires its supervisor's session.

// ResSupervised is the supervised election's path.
const ResSupervised = "supervised"

// OpSupervisedRun is the supervised work's grant; OpSupervise a
// supervisor that returned an error (one a new attempt cannot cure).
const (
	OpSupervisedRun = "supervised.run"
	OpSupervise     = "supervised.supervise"
)

// PropTwice is the property that a supervisor never runs its work twice
// at once: each run starts after the previous one returned.
const PropTwice = "twice"

const workSupervised = "supervised"

// SupervisorClient is the client id under which the history records the
// supervisor of client c (its sessions, its work's holdings), with clients
// the Run's number of clients.
func SupervisorClient(c, clients int) int { return clients + c }

// supervisedClients are the clients that run a supervisor: three of the
// strict ones, so that an overlap is never excused by an expiry the server
// decided alone.
func supervisedClients(clients, strict int) []int {
	var out []int
	for _, c := range []int{0, 2, 3} {
		if c < strict && c < clients {
			out = append(out, c)
		}
	}
	return out
}

// supervisors keeps each supervisor's current session, for ForceExpiry.
type supervisors struct {
	mu  sync.Mutex
	cur map[int]sessionRef // by client
}

// startSupervised starts the supervisors (see supervisedClients).
func (r *runner) startSupervised(ctx context.Context) {
	r.regs[ResSupervised] = NewRegister(r.h, ResSupervised)
	r.sup.cur = map[int]sessionRef{}
	for _, c := range supervisedClients(r.o.Clients, r.o.StrictClients) {
		id := SupervisorClient(c, r.o.Clients)
		r.mu.Lock()
		r.workloads = append(r.workloads, workloadKey{id, ResSupervised})
		r.mu.Unlock()
		r.workers.Add(1)
		go r.supervise(ctx, r.clients[c], id, rand.New(rand.NewPCG(r.o.Seed, uint64(c)<<8|0xc0)))
	}
}

// supervise runs client c's supervisor, recorded as client id, until ctx
// ends.
func (r *runner) supervise(ctx context.Context, c *client, id int, rng *rand.Rand) {
	defer r.workers.Done()
	r.h.Record(Event{Kind: KindWorkload, Client: id, Res: ResSupervised})
	var gen atomic.Int32 // the current session's generation
	newSession := func(ctx context.Context) (*zkrecipes.Session, error) {
		opts := []zkrecipes.SessionOption{zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(r.o.SessionTimeout))}
		if c.strict {
			opts = append(opts, zkrecipes.WithStrict())
		}
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := zkrecipes.NewSession(nctx, c.servers, opts...)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.fail(id, gen.Load()+1, ResSupervised, OpSessionNew, err)
			}
			return nil, err
		}
		g := gen.Add(1)
		sid, _ := s.Credentials()
		r.h.Record(Event{Kind: KindSession, Client: id, Gen: g, Session: sid, Strict: c.strict, Timeout: s.Timeout()})
		ref := sessionRef{s: s, gen: g}
		r.sup.mu.Lock()
		r.sup.cur[c.id] = ref
		r.sup.mu.Unlock()
		r.sessions.Add(1)
		go func() {
			defer r.sessions.Done()
			<-s.Done()
			err := s.Err()
			r.h.Record(Event{Kind: KindSessionEnd, Client: id, Gen: g, ErrKind: Classify(err),
				Confirmed: r.h.Since(s.Client().Confirmed()), Detail: fmt.Sprint(err)})
		}()
		return s, nil
	}
	wk := work{kind: workSupervised, res: []string{ResSupervised}}
	var mu sync.Mutex // the work's draws from rng (one run at a time, unless the supervisor is broken)
	work := func(wctx context.Context) error {
		g := gen.Load()
		token, _ := zkrecipes.HeldToken(wctx)
		// Half the runs are short (60 ms to 1.8 s), half long (1 to 8
		// s), so that faults find a leader at work.
		mu.Lock()
		steps := 3 + rng.IntN(17)
		if rng.IntN(2) == 0 {
			steps = 20 + rng.IntN(80)
		}
		mu.Unlock()
		hd, empty := r.granted(id, g, wk, &grant{op: OpSupervisedRun, mode: Exclusive, token: token, lost: wctx.Done(), fenced: true}, false)
		if long := steps >= 20; long && !empty {
			// A fault aimed at client c may wait for this run (see
			// runner.awaitHolder): it is c's process at work.
			r.mu.Lock()
			r.live[hd.ids[0]] = liveHolding{client: c.id, res: ResSupervised, long: true}
			r.mu.Unlock()
		}
		defer r.released(id, g, hd) // the work returns
		for range steps {
			// A fenced write, then 20 to 80 ms of work, while the
			// context lives.
			if wctx.Err() == nil {
				r.regs[ResSupervised].Write(id, g, hd.ids[0], token)
			}
			t := time.NewTimer(time.Duration(20+rand.IntN(61)) * time.Millisecond)
			select {
			case <-wctx.Done():
				t.Stop()
				if ctx.Err() == nil {
					r.lost(id, g, hd) // else the run is stopping: the release at return says it
				}
				return wctx.Err()
			case <-t.C:
			}
		}
		return nil // it stops running on its own: the release at return says it
	}
	err := zkrecipes.RunWhileLeader(ctx, newSession, r.o.Base+"/"+ResSupervised, fmt.Sprintf("s%d", c.id), work,
		zkrecipes.WithRetry(func(error) bool { return true }), zkrecipes.WithGracePeriod(2*time.Second))
	if err != nil {
		r.fail(id, gen.Load(), ResSupervised, OpSupervise, err)
	}
}

// expireSupervisor expires client c's supervisor's current session, if
// it has one, as ForceExpiry does the client's.
func (r *runner) expireSupervisor(ctx context.Context, c int) string {
	r.sup.mu.Lock()
	ref, ok := r.sup.cur[c]
	r.sup.mu.Unlock()
	if !ok || over(ref.s) {
		return ""
	}
	id, pw := ref.s.Credentials()
	r.h.Record(Event{Kind: KindForcedExpiry, Client: SupervisorClient(c, r.o.Clients), Gen: ref.gen, Session: id})
	return fmt.Sprintf("; its supervisor's session 0x%x (generation %d): %s", id, ref.gen, r.expire(ctx, id, pw))
}

// twiceCheck finds a supervised work started again, by one supervisor,
// before its previous run returned (the last KindRelease of a supervised
// holding is its return).
func twiceCheck(events []Event) []Violation {
	type run struct {
		holding     int32
		start, done time.Duration
		returned    bool
	}
	runs := map[int][]*run{} // by client, in start order
	byID := map[int32]*run{}
	for _, e := range events {
		if e.Res != ResSupervised {
			continue
		}
		switch e.Kind {
		case KindGrant:
			x := &run{holding: e.Holding, start: e.At}
			runs[e.Client] = append(runs[e.Client], x)
			byID[e.Holding] = x
		case KindRelease:
			if x := byID[e.Holding]; x != nil {
				x.done, x.returned = e.At, true
			}
		}
	}
	var out []Violation
	for c, rs := range runs {
		for i := 1; i < len(rs); i++ {
			prev, next := rs[i-1], rs[i]
			if !prev.returned || next.start < prev.done {
				end := "had not returned"
				if prev.returned {
					end = fmt.Sprintf("returned only at %.3fs", prev.done.Seconds())
				}
				out = append(out, Violation{Property: PropTwice, At: next.start, Res: ResSupervised, Clients: []int{c},
					Holdings: []int32{prev.holding, next.holding},
					Msg: fmt.Sprintf("client %d's supervised work h%d started while its run h%d (started %.3fs) %s",
						c, next.holding, prev.holding, prev.start.Seconds(), end)})
			}
		}
	}
	return out
}
