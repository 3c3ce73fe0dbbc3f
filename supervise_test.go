package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The supervisors (issue 25): RunWhileLeader, RunWhileLocked, RunAsMember.

// runs records every run of supervised work, of every supervisor of a
// test (each a process of its own), and checks at each start that no
// other run is still going: none of the same supervisor (a process runs
// its work once at a time), and none of another that was not cancelled or
// has not returned (two processes never act at once).
type runs struct {
	t *testing.T
	// linger is how long work goes on after its context is cancelled
	// (a slow shutdown), to see that nothing starts meanwhile.
	linger time.Duration

	mu  sync.Mutex
	all []*run
}

type run struct {
	who     string
	ctx     context.Context
	session int64
	token   int64 // zkrecipes.HeldToken's; -1 if it had none
	done    bool
}

// work returns supervised work for who: it records the run, then waits
// for its context to be cancelled and returns linger later, or returns
// what body returns if body is not nil. session tells the run's session id.
func (rs *runs) work(who string, session func() int64, body func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		r := &run{who: who, ctx: ctx, token: -1}
		if tok, ok := zkrecipes.HeldToken(ctx); ok {
			r.token = tok
		}
		if session != nil {
			r.session = session()
		}
		rs.mu.Lock()
		for i, o := range rs.all {
			switch {
			case o.done:
			case o.who == who:
				rs.t.Errorf("%s: a run started while its run #%d was running", who, i)
			case o.ctx.Err() == nil:
				rs.t.Errorf("%s: a run started while %s's run #%d was running, not cancelled", who, o.who, i)
			default:
				rs.t.Errorf("%s: a run started while %s's cancelled run #%d had not returned", who, o.who, i)
			}
		}
		rs.all = append(rs.all, r)
		rs.mu.Unlock()
		defer func() {
			rs.mu.Lock()
			r.done = true
			rs.mu.Unlock()
		}()
		if body != nil {
			return body(ctx)
		}
		<-ctx.Done()
		time.Sleep(rs.linger)
		return ctx.Err()
	}
}

// waitRunning waits until who's n-th run (from 1) is running, and returns it.
func (rs *runs) waitRunning(who string, n int) *run {
	rs.t.Helper()
	var got *run
	zktest.Eventually(rs.t, 30*time.Second, fmt.Sprintf("%s's run #%d", who, n), func() error {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		k := 0
		for _, r := range rs.all {
			if r.who == who {
				k++
				if k == n && !r.done {
					got = r
					return nil
				}
			}
		}
		return fmt.Errorf("%d runs of %s", k, who)
	})
	return got
}

func (rs *runs) count(who string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, r := range rs.all {
		if r.who == who {
			n++
		}
	}
	return n
}

// factory makes the sessions of one supervisor and keeps them, to check
// that the supervisor closed every one.
type factory struct {
	t       *testing.T
	servers []string
	opts    []zkrecipes.SessionOption
	calls   atomic.Int32
	refuse  atomic.Bool // fail every call

	mu   sync.Mutex
	made []*zkrecipes.Session
}

func newFactory(t *testing.T, servers []string, opts ...zkrecipes.SessionOption) *factory {
	f := &factory{t: t, servers: servers, opts: opts}
	t.Cleanup(func() {
		for _, s := range f.sessions() {
			s.Close()
		}
	})
	return f
}

func (f *factory) new(ctx context.Context) (*zkrecipes.Session, error) {
	f.calls.Add(1)
	if f.refuse.Load() {
		return nil, errors.New("factory: refused")
	}
	ctx, cancel := context.WithTimeout(ctx, zktest.Bound(3*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, f.servers, f.opts...)
	if err == nil {
		f.mu.Lock()
		f.made = append(f.made, s)
		f.mu.Unlock()
	}
	return s, err
}

func (f *factory) sessions() []*zkrecipes.Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.made)
}

// last returns the id of the newest session.
func (f *factory) last() int64 {
	ss := f.sessions()
	if len(ss) == 0 {
		return 0
	}
	return ss[len(ss)-1].ID()
}

// allClosed fails the test if a session the factory made is not over.
func (f *factory) allClosed() {
	f.t.Helper()
	for _, s := range f.sessions() {
		select {
		case <-s.Done():
		default:
			f.t.Errorf("session 0x%x left open by its supervisor", s.ID())
		}
	}
}

// supEvents records a supervisor's events.
type supEvents struct {
	mu  sync.Mutex
	all []zkrecipes.SupervisorEvent
}

func (ev *supEvents) add(e zkrecipes.SupervisorEvent) {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
}

func (ev *supEvents) list() []zkrecipes.SupervisorEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return slices.Clone(ev.all)
}

func (ev *supEvents) count(st zkrecipes.SupervisorState) int {
	n := 0
	for _, e := range ev.list() {
		if e.State == st {
			n++
		}
	}
	return n
}

// find returns the first event for which match holds.
func (ev *supEvents) find(match func(zkrecipes.SupervisorEvent) bool) (zkrecipes.SupervisorEvent, bool) {
	for _, e := range ev.list() {
		if match(e) {
			return e, true
		}
	}
	return zkrecipes.SupervisorEvent{}, false
}

func shortSessions(timeout time.Duration, opts ...zkrecipes.SessionOption) []zkrecipes.SessionOption {
	return append(opts, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(timeout)))
}

// TestRunWhileLeaderLossAndExpiry: a supervised leader whose node is
// deleted stops its work and leads again on the same session; after a
// forced expiry it stops its work and leads again on a new session; its
// runs never overlap; when its context ends while it leads, it returns
// nil, leaving no node and no session.
func TestRunWhileLeaderLossAndExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/leader"
	rs := &runs{t: t, linger: 300 * time.Millisecond}
	f := newFactory(t, e.servers, shortSessions(2*time.Second)...)
	var ev supEvents
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := async(func() error {
		return zkrecipes.RunWhileLeader(sctx, f.new, path, "a", rs.work("a", f.last, nil), zkrecipes.WithSupervisorEvents(ev.add))
	})

	r1 := rs.waitRunning("a", 1)
	kids := e.children(path)
	if len(kids) != 1 {
		t.Fatalf("election nodes %v, want one", kids)
	}
	must(t, e.admin.Delete(path+"/"+kids[0], -1), "delete the leader's node")
	r2 := rs.waitRunning("a", 2)
	if r1.ctx.Err() == nil {
		t.Error("run 1 not cancelled after its node was deleted")
	}
	if r2.session != r1.session {
		t.Errorf("after the node was deleted, ran on session 0x%x, not on the live one 0x%x", r2.session, r1.session)
	}
	if r1.token <= 0 || r2.token <= r1.token {
		t.Errorf("fencing tokens %d then %d, want positive and increasing", r1.token, r2.token)
	}
	if _, ok := ev.find(func(e zkrecipes.SupervisorEvent) bool {
		return e.State == zkrecipes.SupervisorCancelled && e.Reason == zkrecipes.LossDeleted
	}); !ok {
		t.Errorf("no Cancelled event with reason %q: %v", zkrecipes.LossDeleted, ev.list())
	}

	first := f.sessions()[0]
	e.expire(first)
	r3 := rs.waitRunning("a", 3)
	if r2.ctx.Err() == nil {
		t.Error("run 2 not cancelled after its session expired")
	}
	if r3.session == r2.session {
		t.Errorf("after the expiry, ran again on the expired session 0x%x", r3.session)
	}
	if r3.token <= r2.token {
		t.Errorf("fencing token %d after the expiry, want above %d", r3.token, r2.token)
	}
	closed(t, first.Done(), "the expired session")
	if _, ok := ev.find(func(e zkrecipes.SupervisorEvent) bool {
		return e.State == zkrecipes.SupervisorCancelled && e.Reason == zkrecipes.LossExpired
	}); !ok {
		t.Errorf("no Cancelled event with reason %q: %v", zkrecipes.LossExpired, ev.list())
	}
	if n := ev.count(zkrecipes.SupervisorRenewing); n != 2 {
		t.Errorf("%d Renewing supEvents, want 2 (the first session, the one after the expiry)", n)
	}

	// Stop while leading.
	stop()
	if err := result(t, done, "RunWhileLeader"); err != nil {
		t.Errorf("RunWhileLeader = %v after its context ended", err)
	}
	if r3.ctx.Err() == nil {
		t.Error("run 3 not cancelled when the supervisor stopped")
	}
	f.allClosed()
	e.empty(path)
	if evs := ev.list(); evs[len(evs)-1].State != zkrecipes.SupervisorStopped {
		t.Errorf("last event %v, want Stopped", evs[len(evs)-1])
	}
}

// TestRunWhileLeaderStrictCutLink: two processes (supervisors with
// sessions of their own) lead in turn. The leader's link is cut (all
// traffic held): strict mode cancels its work, which returns, before the
// server expires the session and the other is elected. The first leads
// again on a new session once the link is back and the other stops; no
// two runs ever overlap. Each supervisor is stopped once while it waits in
// line and once while it leads.
func TestRunWhileLeaderStrictCutLink(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/leader"
	rs := &runs{t: t, linger: 300 * time.Millisecond}
	px := e.proxy()
	fa := newFactory(t, []string{px.Addr()}, shortSessions(2*time.Second, zkrecipes.WithStrict())...)
	fb := newFactory(t, e.servers, shortSessions(2*time.Second)...)
	var eva supEvents
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := async(func() error {
		return zkrecipes.RunWhileLeader(actx, fa.new, path, "a", rs.work("a", fa.last, nil), zkrecipes.WithSupervisorEvents(eva.add))
	})
	ra := rs.waitRunning("a", 1)

	// b waits in line; stopped there, it leaves nothing.
	bctx, stopB := context.WithCancel(ctx)
	b := async(func() error { return zkrecipes.RunWhileLeader(bctx, fb.new, path, "b", rs.work("b", fb.last, nil)) })
	e.waitFor("b in line", func() bool { return len(e.children(path)) == 2 })
	stopB()
	must(t, result(t, b, "b stopped while waiting"), "b stopped while waiting")
	fb.allClosed()
	e.waitFor("b's node gone", func() bool { return len(e.children(path)) == 1 })

	bctx, stopB = context.WithCancel(ctx)
	defer stopB()
	b = async(func() error { return zkrecipes.RunWhileLeader(bctx, fb.new, path, "b", rs.work("b", fb.last, nil)) })
	e.waitFor("b in line again", func() bool { return len(e.children(path)) == 2 })

	px.Pause()
	rb := rs.waitRunning("b", 1) // the check at b's start: a's run was cancelled and returned
	if ra.ctx.Err() == nil {
		t.Fatal("b leads while a's work is not cancelled")
	}
	if ev, ok := eva.find(func(e zkrecipes.SupervisorEvent) bool { return e.State == zkrecipes.SupervisorCancelled }); !ok || ev.Reason != zkrecipes.LossStrict {
		t.Errorf("a's Cancelled event %+v (found %v), want reason %q", ev, ok, zkrecipes.LossStrict)
	}
	px.Pass()
	// a is back, in line behind b, on a new session.
	e.waitFor("a in line again", func() bool { return len(e.children(path)) == 2 })
	stopB()
	must(t, result(t, b, "b stopped while leading"), "b stopped while leading")
	if rb.ctx.Err() == nil {
		t.Error("b's run not cancelled when it stopped")
	}
	fb.allClosed()
	ra2 := rs.waitRunning("a", 2)
	if ra2.session == ra.session {
		t.Errorf("a ran again on session 0x%x, which had expired", ra.session)
	}
	stopA()
	must(t, result(t, a, "a stopped while leading"), "a stopped while leading")
	fa.allClosed()
	e.empty(path)
}

// TestSuperviseStrictLossSessionLives: a strict leader whose link stalls
// for less than the session timeout loses its leadership (strict) while
// its session lives: its work is cancelled, and it leads again on that
// same session.
func TestSuperviseStrictLossSessionLives(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/lock"
	rs := &runs{t: t, linger: 300 * time.Millisecond}
	px := e.proxy()
	// The link comes back as soon as the strict margin (2 s) passed, well
	// before the server could expire the session (4 s).
	f := newFactory(t, []string{px.Addr()}, shortSessions(4*time.Second, zkrecipes.WithStrict())...)
	var ev supEvents
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := async(func() error {
		return zkrecipes.RunWhileLocked(sctx, f.new, path, rs.work("a", f.last, nil), zkrecipes.WithSupervisorEvents(ev.add))
	})
	r1 := rs.waitRunning("a", 1)
	px.Pause()
	closed(t, r1.ctx.Done(), "a's work's context")
	px.Pass()
	r2 := rs.waitRunning("a", 2)
	if r2.session != r1.session {
		t.Errorf("ran again on session 0x%x, not on the live one 0x%x", r2.session, r1.session)
	}
	if e, ok := ev.find(func(e zkrecipes.SupervisorEvent) bool { return e.State == zkrecipes.SupervisorCancelled }); !ok || e.Reason != zkrecipes.LossStrict {
		t.Errorf("Cancelled event %+v, want reason %q", e, zkrecipes.LossStrict)
	}
	stop()
	must(t, result(t, done, "RunWhileLocked"), "RunWhileLocked")
	f.allClosed()
	e.empty(path)
}

// TestSuperviseNoTightLoop: under a permanent failure, of the session
// factory or of the work, a supervisor's attempts are spaced by a pause
// that doubles (at least 50 ms, 100 ms, 200 ms...): within 2 s, at most
// six attempts. Stopped in a pause or while the factory works, it returns
// at once.
func TestSuperviseNoTightLoop(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/leader"
	const window = 2 * time.Second
	const most = 6 // attempts at 0, ≥50ms, ≥150ms, ≥350ms, ≥750ms, ≥1550ms

	// The factory fails.
	f := newFactory(t, e.servers, shortSessions(2*time.Second)...)
	f.refuse.Store(true)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	done := async(func() error {
		return zkrecipes.RunWhileLeader(sctx, f.new, path, "a", func(context.Context) error { return nil })
	})
	e.waitFor("two attempts", func() bool { return f.calls.Load() >= 2 })
	time.Sleep(window - time.Since(start)) // the window is the measure, not a wait for an event
	stop()
	if n := f.calls.Load(); n > most {
		t.Errorf("the factory was called %d times in %v, want at most %d", n, time.Since(start).Round(time.Millisecond), most)
	}
	must(t, result(t, done, "RunWhileLeader stopped in a pause"), "RunWhileLeader stopped in a pause")

	// The work fails at once, every time.
	f = newFactory(t, e.servers, shortSessions(2*time.Second)...)
	var ev supEvents
	boom := errors.New("boom")
	sctx, stop = context.WithCancel(ctx)
	defer stop()
	start = time.Now()
	done = async(func() error {
		return zkrecipes.RunWhileLeader(sctx, f.new, path, "a", func(context.Context) error { return boom }, zkrecipes.WithSupervisorEvents(ev.add))
	})
	e.waitFor("two campaigns", func() bool { return ev.count(zkrecipes.SupervisorAcquiring) >= 2 })
	time.Sleep(window - time.Since(start))
	stop()
	if n := ev.count(zkrecipes.SupervisorAcquiring); n > most {
		t.Errorf("%d campaigns in %v, want at most %d", n, time.Since(start).Round(time.Millisecond), most)
	}
	must(t, result(t, done, "RunWhileLeader"), "RunWhileLeader")
	if e, ok := ev.find(func(e zkrecipes.SupervisorEvent) bool { return e.State == zkrecipes.SupervisorPause }); !ok || !errors.Is(e.Err, boom) {
		t.Errorf("Pause event %+v, want one for the work's error", e)
	}
	f.allClosed()
	e.empty(path)

	// Stopped while the factory is making a session.
	asked := make(chan struct{})
	sctx, stop = context.WithCancel(ctx)
	defer stop()
	done = async(func() error {
		return zkrecipes.RunWhileLeader(sctx, func(ctx context.Context) (*zkrecipes.Session, error) {
			close(asked)
			<-ctx.Done()
			return nil, ctx.Err()
		}, path, "a", func(context.Context) error { return nil })
	})
	<-asked
	stop()
	must(t, result(t, done, "RunWhileLeader stopped while renewing"), "RunWhileLeader stopped while renewing")
}

// TestSuperviseRetryAndGrace: WithRetry decides what the work's return
// does (stop with its error, or the default: stop on nil); work that
// overruns its grace period is reported and its holding released, but
// the supervisor returns only once the work did.
func TestSuperviseRetryAndGrace(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/lock"
	f := newFactory(t, e.servers, shortSessions(2*time.Second)...)

	boom := errors.New("boom")
	err := zkrecipes.RunWhileLocked(ctx, f.new, path, func(context.Context) error { return boom },
		zkrecipes.WithRetry(func(error) bool { return false }))
	if !errors.Is(err, boom) {
		t.Errorf("RunWhileLocked with no retry = %v, want %v", err, boom)
	}
	must(t, zkrecipes.RunWhileLocked(ctx, f.new, path, func(context.Context) error { return nil }), "RunWhileLocked, work done")
	f.allClosed()
	e.empty(path)

	// Work that ignores its context until let go.
	var ev supEvents
	letGo := make(chan struct{})
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	rs := &runs{t: t}
	done := async(func() error {
		return zkrecipes.RunWhileLocked(sctx, f.new, path, rs.work("a", nil, func(context.Context) error { <-letGo; return nil }),
			zkrecipes.WithGracePeriod(100*time.Millisecond), zkrecipes.WithSupervisorEvents(ev.add))
	})
	rs.waitRunning("a", 1)
	stop()
	e.waitFor("the overrun reported and the lock released", func() bool { return ev.count(zkrecipes.SupervisorReleased) == 1 })
	if ev.count(zkrecipes.SupervisorOverran) != 1 {
		t.Errorf("no Overran event: %v", ev.list())
	}
	e.empty(path)
	blocked(t, done, "RunWhileLocked with its work running")
	close(letGo)
	must(t, result(t, done, "RunWhileLocked"), "RunWhileLocked")
	f.allClosed()

	for _, bad := range []func() error{
		func() error { return zkrecipes.RunWhileLeader(ctx, f.new, path, "", rs.work("x", nil, nil)) },
		func() error { return zkrecipes.RunWhileLocked(ctx, nil, path, rs.work("x", nil, nil)) },
		func() error { return zkrecipes.RunWhileLocked(ctx, f.new, "no-slash", rs.work("x", nil, nil)) },
		func() error { return zkrecipes.RunAsMember(ctx, f.new, path, "a/b", nil, rs.work("x", nil, nil)) },
		func() error {
			return zkrecipes.RunWhileLocked(ctx, f.new, path, rs.work("x", nil, nil), zkrecipes.WithGracePeriod(0))
		},
	} {
		if err := bad(); !errors.Is(err, zkrecipes.ErrInvalidArgument) && !errors.Is(err, zkclient.ErrInvalidPath) {
			t.Errorf("bad argument: %v, want ErrInvalidArgument", err)
		}
	}

	// A path whose ACL refuses the session: no attempt can cure that.
	ro := e.path + "/read-only"
	e.mkdirs(e.path)
	_, err = e.admin.Create(ro, nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermRead))
	must(t, err, "create %s", ro)
	rctx, cancel := context.WithTimeout(ctx, zktest.Bound(5*time.Second))
	defer cancel()
	if err := zkrecipes.RunWhileLocked(rctx, f.new, ro, rs.work("x", nil, nil)); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("RunWhileLocked on a path refusing the session = %v, want ErrNoAuth", err)
	}
	f.allClosed()
	if n := rs.count("x"); n != 0 {
		t.Errorf("work ran %d times with a bad argument", n)
	}
}

// TestRunAsMember: a supervised member whose node is deleted joins again
// (on the same session) and runs its work again; a second supervisor of
// the same id waits until the first stops.
func TestRunAsMember(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/group"
	rs := &runs{t: t, linger: 300 * time.Millisecond}
	fa := newFactory(t, e.servers, shortSessions(2*time.Second)...)
	fb := newFactory(t, e.servers, shortSessions(2*time.Second)...)
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := async(func() error {
		return zkrecipes.RunAsMember(actx, fa.new, path, "m", []byte("a"), rs.work("a", fa.last, nil))
	})
	r1 := rs.waitRunning("a", 1)
	must(t, e.admin.Delete(path+"/m", -1), "delete the member's node")
	r2 := rs.waitRunning("a", 2)
	if r1.ctx.Err() == nil || r2.session != r1.session {
		t.Errorf("after a deletion: run 1 cancelled %v, session 0x%x then 0x%x", r1.ctx.Err() != nil, r1.session, r2.session)
	}
	if r1.token != 0 {
		t.Errorf("a member's work has token %d, want 0", r1.token)
	}
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	b := async(func() error {
		return zkrecipes.RunAsMember(bctx, fb.new, path, "m", []byte("b"), rs.work("b", fb.last, nil))
	})
	e.waitFor("b waiting for the id", func() bool { return watchersOf(t, e.servers[0], path+"/m") == 2 })
	stopA()
	must(t, result(t, a, "a"), "a")
	rs.waitRunning("b", 1)
	data, _, err := e.admin.Get(path + "/m")
	must(t, err, "get the member")
	if string(data) != "b" {
		t.Errorf("member data %q, want b", data)
	}
	stopB()
	must(t, result(t, b, "b"), "b")
	fa.allClosed()
	fb.allClosed()
	e.empty(path)
}
