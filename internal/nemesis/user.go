package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// A user's workload (package zktest/faulttest) runs instead of the
// project's: RunUser calls it again and again on each client, with the
// same plan, proxies, heal and checker as Run. The workload records its
// own operations through a UserClient: grants (with the holder's Lost
// channel, which the runner watches), noticed losses, releases, fenced
// writes and free-form operations.

// The events only a user's workload records. Their values are apart from
// the project's kinds so that either list can grow.
const (
	// KindLostSeen: the runner saw the Lost channel of holding Holding
	// close (the holder has been told; whether it noticed is KindLost).
	KindLostSeen Kind = 64 + iota
	// KindUserOp: a free-form operation of the user's workload (Res is
	// its key, Data its value); it counts as progress.
	KindUserOp
	// KindUserWork: the user's workload runs on Client (for the progress
	// check).
	KindUserWork
)

func init() {
	kindNames[KindLostSeen] = "lost-seen"
	kindNames[KindUserOp] = "op"
	kindNames[KindUserWork] = "user-workload"
}

// PropLost is broken by a holder that kept using its resource after its
// Lost channel closed: a write more than half its session timeout after
// the close (the strict margin: by then a successor may hold), before the
// holder noticed or released.
const PropLost = "lost"

// The ops of the user's workload's own records.
const (
	OpUserGrant    = "acquired"
	OpUserWorkload = "workload"         // the workload returned an error
	OpUserMisuse   = "faulttest.misuse" // the workload recorded something it could not have (never a fault's kind)
)

// userWork is the name of the user's workload in the runner's progress
// marks.
const userWork = "workload"

// UserWorkload is a user's workload: one pass (say an acquire, a few
// uses, a release) on the client c. It is called again and again on each
// client until the run ends; ctx ends then. An error of a kind a fault
// may cause is recorded (an unconfirmed release closes the client's
// session, whose node would stay while it lives); any other breaks
// property "error".
type UserWorkload func(ctx context.Context, c *UserClient) error

// UserOptions add to Options what a user's run needs.
type UserOptions struct {
	Strict   bool           // every session in strict mode
	Permits  map[string]int // the permits of each Permit resource
	Workload UserWorkload
}

// userRun is the runner's state for a user's workload.
type userRun struct {
	o     UserOptions
	done  chan struct{} // closed once the workloads have stopped
	regMu sync.Mutex
}

// UserClient is one client of a user's run: its Session (a new one after
// an expiry) and the recorder of its operations. Safe for concurrent use.
type UserClient struct {
	r   *runner
	c   *client
	rng *rand.Rand

	mu   sync.Mutex
	held map[string]*userHolding // by resource: the latest holding
}

type userHolding struct {
	id    int32
	gen   int32
	token int64
	ended chan struct{} // closed by Lost or Released
	done  bool
}

// ID returns the client's number, from 0.
func (u *UserClient) ID() int { return u.c.id }

// Rand returns the client's generator, seeded from the run's seed and
// the client. It is for the workload's goroutine only.
func (u *UserClient) Rand() *rand.Rand { return u.rng }

// Path returns the path of name under the run's base.
func (u *UserClient) Path(name string) string { return u.r.o.Base + "/" + name }

// Session returns the client's live session, making a new one if the
// last one is over; it waits until ctx ends.
func (u *UserClient) Session(ctx context.Context) (*zkrecipes.Session, error) {
	ref, err := u.c.session(ctx)
	if err != nil {
		return nil, err
	}
	return ref.s, nil
}

func (u *UserClient) gen() int32 {
	if ref := u.c.peek(); ref != nil {
		return ref.gen
	}
	return 0
}

// Acquired records a holding of res in mode with token, granted on the
// client's current session, whose Lost channel is lost (nil: unknown).
func (u *UserClient) Acquired(res string, mode Mode, token int64, lost <-chan struct{}) {
	r := u.r
	gen := u.gen()
	empty := lost != nil && isClosed(lost)
	h := &userHolding{id: r.nextID(), gen: gen, token: token, ended: make(chan struct{})}
	u.mu.Lock()
	if old := u.held[res]; old != nil && !old.done {
		old.done = true
		close(old.ended)
		r.mu.Lock()
		delete(r.live, old.id)
		r.mu.Unlock()
	}
	u.held[res] = h
	u.mu.Unlock()
	r.h.Record(Event{Kind: KindGrant, Client: u.c.id, Gen: gen, Res: res, Work: userWork, Mode: mode, Holding: h.id, Token: token, Op: OpUserGrant, Empty: empty})
	if empty {
		u.end(res, h)
		return
	}
	r.mu.Lock()
	r.live[h.id] = liveHolding{u.c.id, res, true}
	r.acquired[workloadKey{u.c.id, userWork}] = true
	r.mu.Unlock()
	if lost != nil {
		go func() {
			select {
			case <-lost:
				r.h.Record(Event{Kind: KindLostSeen, Client: u.c.id, Gen: gen, Res: res, Holding: h.id, Detail: fmt.Sprintf("%s h%d", res, h.id)})
			case <-h.ended:
			case <-r.user.done:
			}
		}()
	}
}

// holding returns the latest holding of res, or records a misuse.
func (u *UserClient) holding(res, what string) *userHolding {
	u.mu.Lock()
	h := u.held[res]
	u.mu.Unlock()
	if h == nil {
		u.r.h.Record(Event{Kind: KindError, Client: u.c.id, Gen: u.gen(), Res: res, Op: OpUserMisuse,
			Detail: fmt.Sprintf("%s(%q) without an Acquired of it before", what, res)})
	}
	return h
}

// end ends the holding h of res for the runner's waits.
func (u *UserClient) end(res string, h *userHolding) {
	u.mu.Lock()
	if !h.done {
		h.done = true
		close(h.ended)
	}
	u.mu.Unlock()
	u.r.mu.Lock()
	delete(u.r.live, h.id)
	u.r.mu.Unlock()
}

// Lost records that the holder noticed the Lost channel of its holding of
// res closed: it stops using res now.
func (u *UserClient) Lost(res string) {
	if h := u.holding(res, "Lost"); h != nil {
		u.r.h.Record(Event{Kind: KindLost, Client: u.c.id, Gen: h.gen, Res: res, Holding: h.id})
		u.end(res, h)
	}
}

// Released records that the holder starts releasing its holding of res.
func (u *UserClient) Released(res string) {
	if h := u.holding(res, "Released"); h != nil {
		u.r.h.Record(Event{Kind: KindRelease, Client: u.c.id, Gen: h.gen, Res: res, Holding: h.id})
		u.end(res, h)
	}
}

// Wrote records a fenced write to res with token, by the client's latest
// holding of res, and whether the fence accepted it.
func (u *UserClient) Wrote(res string, token int64, accepted bool) {
	h := u.holding(res, "Wrote")
	if h == nil {
		return
	}
	u.r.h.Record(Event{Kind: KindWrite, Client: u.c.id, Gen: h.gen, Res: res, Holding: h.id, Token: token, Accepted: accepted})
}

// WriteFenced offers a write with token to the run's fenced register of
// res (made at the first write, shared by the clients), by the client's
// latest holding of res; the register records its decision and it is
// returned.
func (u *UserClient) WriteFenced(res string, token int64) bool {
	h := u.holding(res, "WriteFenced")
	if h == nil {
		return false
	}
	r := u.r
	r.user.regMu.Lock()
	reg := r.regs[res]
	if reg == nil {
		reg = NewRegister(r.h, res)
		r.regs[res] = reg
	}
	r.user.regMu.Unlock()
	return reg.Write(u.c.id, h.gen, h.id, token)
}

// Op records a free-form operation, key=value; it counts as progress.
func (u *UserClient) Op(key, value string) {
	u.r.h.Record(Event{Kind: KindUserOp, Client: u.c.id, Gen: u.gen(), Res: key, Data: value, Detail: key + "=" + value})
	u.r.mu.Lock()
	u.r.acquired[workloadKey{u.c.id, userWork}] = true
	u.r.mu.Unlock()
}

// RunUser runs the user's workload (uo.Workload) on every client of o
// under the seeded plan's faults, as Run does the project's, then heals
// everything, waits for every client to acquire or record an operation
// again, closes the sessions, looks for recipe nodes left behind and
// checks the history with CheckUser.
func RunUser(ctx context.Context, o Options, uo UserOptions) (*Result, error) {
	if uo.Workload == nil {
		return nil, errors.New("nemesis: RunUser without a workload")
	}
	return run(ctx, o, &userRun{o: uo, done: make(chan struct{})})
}

// start starts the workload on every client.
func (u *userRun) start(ctx context.Context, r *runner) {
	for _, c := range r.clients {
		uc := &UserClient{r: r, c: c, held: map[string]*userHolding{},
			rng: rand.New(rand.NewPCG(r.o.Seed, uint64(c.id)<<8|0x75))} // 'u'
		r.mu.Lock()
		r.workloads = append(r.workloads, workloadKey{c.id, userWork})
		r.mu.Unlock()
		r.h.Record(Event{Kind: KindUserWork, Client: c.id})
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			for ctx.Err() == nil {
				err := u.o.Workload(ctx, uc)
				switch {
				case err == nil || ctx.Err() != nil:
					sleep(ctx, time.Duration(uc.rng.IntN(20))*time.Millisecond)
				case errors.Is(err, zkrecipes.ErrLocked):
					r.h.Record(Event{Kind: KindBusy, Client: c.id, Gen: uc.gen(), Op: OpUserWorkload, Detail: err.Error()})
				default:
					gen := uc.gen()
					r.fail(c.id, gen, "", OpUserWorkload, err)
					if errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) {
						// The node stays while the session lives: close
						// it, as documented; the next Session makes one.
						c.retire(gen)
					}
					sleep(ctx, time.Duration(50+uc.rng.IntN(150))*time.Millisecond)
				}
			}
		}()
	}
}

// leftover tells, in a user's run, whether a node the scan found was left
// behind: an ephemeral node (every session is closed), or one named like
// a recipe's member node (a sequence number of 10 digits: a lock, lease,
// candidate or queue item).
func userLeftover(p string, st zkclient.Stat) bool {
	if st.EphemeralOwner != 0 {
		return true
	}
	name := p[strings.LastIndexByte(p, '/')+1:]
	if len(name) < 10 {
		return false
	}
	for _, ch := range name[len(name)-10:] {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// ignoredLost tells whether, at time at, the holder of x had been told
// its Lost closed more than half its session's timeout before (the
// strict margin), without noticing: from then on a successor may hold,
// and no excuse holds for a holder that went on.
func ignoredLost(x *holding, at time.Duration, s *session) bool {
	return x.told != math.MaxInt64 && at > x.told+s.timeout/2
}

// CheckUser judges the history of a user's run: Check's properties (the
// exclusion, tokens, fenced registers, errors, leftovers), with PropLost
// and the user's progress (every client acquires or records an operation
// within ProgressBound of the heal) added.
func CheckUser(events []Event, cfg Config) Report {
	r := Check(events, cfg)
	hs, ss := rebuild(events)
	r.Violations = append(r.Violations, lostCheck(events, hs, ss)...)
	pv, pmax := userProgress(events, cfg)
	r.Violations = append(r.Violations, pv...)
	r.Counts.ProgressMax = pmax
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return r
}

// lostCheck finds writes a holder made more than the strict margin after
// it had been told its Lost closed, while it had not noticed.
func lostCheck(events []Event, hs map[int32]*holding, ss map[sessionKey]*session) []Violation {
	var out []Violation
	reported := map[int32]bool{}
	for _, e := range events {
		if e.Kind != KindWrite || reported[e.Holding] {
			continue
		}
		h := hs[e.Holding]
		if h == nil || e.At > h.end {
			continue // the register check reports a write outside its holding
		}
		s := ss[sessionKey{h.client, h.gen}]
		if s == nil || !ignoredLost(h, e.At, s) {
			continue
		}
		reported[e.Holding] = true
		out = append(out, Violation{Property: PropLost, At: e.At, Res: e.Res, Clients: []int{e.Client}, Holdings: []int32{e.Holding},
			Msg: fmt.Sprintf("%s: h%d (c%d/%d, token %d) wrote at %.3fs (accepted=%v), %v after its Lost closed at %.3fs, and had not noticed (strict margin %v)",
				e.Res, h.id, h.client, h.gen, e.Token, e.At.Seconds(), e.Accepted, (e.At - h.told).Round(time.Millisecond), h.told.Seconds(), s.timeout/2)})
	}
	return out
}

// userProgress checks that every client of the user's workload acquired
// (a holding whose Lost was open) or recorded an operation within
// ProgressBound of the heal; it returns the slowest one's delay.
func userProgress(events []Event, cfg Config) ([]Violation, time.Duration) {
	healed, ok := time.Duration(0), false
	var clients []int
	first := map[int]time.Duration{}
	for _, e := range events {
		switch e.Kind {
		case KindHealed:
			healed, ok = e.At, true
		case KindUserWork:
			clients = append(clients, e.Client)
		case KindGrant, KindUserOp:
			if _, seen := first[e.Client]; ok && !seen && !e.Empty {
				first[e.Client] = e.At
			}
		}
	}
	if !ok {
		return nil, 0 // Check reports the missing heal
	}
	var out []Violation
	var slowest time.Duration
	for _, c := range clients {
		t, acted := first[c]
		switch {
		case !acted:
			out = append(out, Violation{Property: PropProgress, At: healed, Clients: []int{c},
				Msg: fmt.Sprintf("client %d neither acquired nor recorded an operation after the heal at %.3fs", c, healed.Seconds())})
		case t-healed > cfg.ProgressBound:
			out = append(out, Violation{Property: PropProgress, At: t, Clients: []int{c},
				Msg: fmt.Sprintf("client %d first acted %v after the heal, beyond the bound of %v", c, (t - healed).Round(time.Millisecond), cfg.ProgressBound)})
		}
		if acted {
			slowest = max(slowest, t-healed)
		}
	}
	return out, slowest
}

// UserSummary is the one-line account of a user's run.
func UserSummary(seed uint64, faults int, wall time.Duration, events []Event, r Report) string {
	c := r.Counts
	ops, seen := 0, 0
	for _, e := range events {
		switch e.Kind {
		case KindUserOp:
			ops++
		case KindLostSeen:
			seen++
		}
	}
	grants, nerr := 0, 0
	for _, n := range c.Grants {
		grants += n
	}
	for _, n := range c.Errors {
		nerr += n
	}
	return fmt.Sprintf("faulttest seed=%d wall=%v faults=%d [%s] sessions=%d expired=%d forced=%d grants=%d lost-at-grant=%d lost-closed=%d lost-noticed=%d excused-overlaps=[forced=%d expired=%d] writes=%d refused=%d ops=%d errors=%d [%s] progress-max=%v leftovers=%d violations=%d",
		seed, wall.Round(time.Second), faults, kv(c.Faults), c.Sessions, c.Expired, c.Forced, grants, c.EmptyGrants, seen, c.Lost,
		c.ExcusedForced, c.ExcusedExpiry, c.Writes, c.Rejected, ops, nerr, kv(c.Errors), c.ProgressMax.Round(time.Millisecond), c.Leftovers, len(r.Violations))
}
