package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// leaderTracker records which participant believes it leads, by each
// participant's own view: from Campaign's return until its Lost closes (it
// then reports it) or until it stops believing before resigning.
//
// Session expiry needs care. zktest.ExpireSession ends the session on the
// server at once (its nodes go in the same transaction, which may wake the
// successor), but the old client learns it only when it reconnects and is
// told, so for a moment two participants may believe, though only one of
// them still has a session. No client can do better: that is what strict
// mode and fencing tokens are for. The tracker therefore stops counting a
// participant as soon as the test decides to expire its session, before
// ExpireSession is called: its node still exists then, so nobody can be
// elected in that gap, and a successor elected while the old leader still
// had its session would still be caught. The test also checks that the
// expired leader's Lost does close.
type leaderTracker struct {
	t        *testing.T
	mu       sync.Mutex
	leader   int // -1: nobody believes
	el       *zkrecipes.Election
	session  *zkrecipes.Session
	token    int64
	epoch    int // counts beliefs
	expiring map[*zkrecipes.Session]bool
	sessions []*zkrecipes.Session // each participant's current session
}

func (tr *leaderTracker) believe(i int, s *zkrecipes.Session, el *zkrecipes.Election) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.expiring[s] {
		return // being expired by the test (see above)
	}
	if tr.leader >= 0 {
		tr.t.Errorf("participant %d believes it leads while participant %d does", i, tr.leader)
	}
	if tok := el.Token(); tok <= tr.token {
		tr.t.Errorf("participant %d leads with token %d, not above the previous leader's %d", i, tok, tr.token)
	} else {
		tr.token = tok
	}
	tr.leader, tr.el, tr.session = i, el, s
	tr.epoch++
}

func (tr *leaderTracker) doubt(i int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.leader == i {
		tr.leader, tr.el, tr.session = -1, nil, nil
	}
}

// current returns the believing leader, if any, and the epoch.
func (tr *leaderTracker) current() (int, *zkrecipes.Election, *zkrecipes.Session, int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.leader, tr.el, tr.session, tr.epoch
}

// expiring marks s as being expired by the test: from now on its holder is
// not counted as a believer.
func (tr *leaderTracker) markExpiring(s *zkrecipes.Session) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.expiring[s] = true
	if tr.session == s {
		tr.leader, tr.el, tr.session = -1, nil, nil
	}
}

// TestElectionChurn runs 10 participants through 50 rounds in which the
// leader resigns or its session expires (and sometimes a waiting
// participant's too): at every instant at most one participant believes it
// leads, a leader is elected again every time, tokens increase, an expired
// leader's Lost closes, and Leader and Observe agree with the leader's own
// view.
func TestElectionChurn(t *testing.T) {
	e := newEnv(t)
	const participants, rounds = 10, 50
	path := e.path + "/election"
	ctx := ctxTimeout(t, 3*time.Minute)
	tr := &leaderTracker{t: t, leader: -1, expiring: map[*zkrecipes.Session]bool{}, sessions: make([]*zkrecipes.Session, participants)}
	lostSeen := make(chan *zkrecipes.Session, 2*rounds)
	pctx, stop := context.WithCancel(ctx) // participants campaign until stop

	var wg sync.WaitGroup
	for i := range participants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("p%d", i)
			for {
				s, err := zkrecipes.NewSession(ctx, e.servers)
				if !check(t, err, "%s: NewSession", id) {
					return
				}
				tr.mu.Lock()
				tr.sessions[i] = s
				tr.mu.Unlock()
				var opts []zkrecipes.LockOption
				if i%2 == 0 {
					opts = append(opts, zkrecipes.WithGrants()) // half hand over by grant
				}
				el := zkrecipes.NewElection(s, path, id, opts...)
				for s.Err() == nil {
					if err := el.Campaign(pctx); err != nil {
						if pctx.Err() != nil {
							s.Close()
							return
						}
						if s.Err() == nil {
							t.Errorf("%s: Campaign: %v", id, err)
							s.Close()
							return
						}
						break // expired while campaigning
					}
					tr.believe(i, s, el)
					select {
					case <-el.Lost():
					case <-pctx.Done():
					}
					tr.doubt(i)
					if pctx.Err() != nil {
						if s.Err() == nil {
							check(t, el.Resign(ctx), "%s: final Resign", id)
						}
						s.Close()
						return
					}
					if s.Err() != nil {
						lostSeen <- s
					}
					// Otherwise the test made us resign: campaign again.
				}
				s.Close()
			}
		}()
	}

	obsSession := e.session()
	observer := zkrecipes.NewElection(obsSession, path, "observer")
	observed, err := observer.Observe(ctx)
	must(t, err, "Observe")

	epoch := 0
	waitLeader := func(round int) (int, *zkrecipes.Election, *zkrecipes.Session) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			i, el, s, ep := tr.current()
			if i >= 0 && ep > epoch {
				epoch = ep
				return i, el, s
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no new leader after 30s", round)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	var resigns, expiries, bystanders int
	expired := map[*zkrecipes.Session]string{} // leaders expired, until their Lost closes
	for round := range rounds {
		leader, el, s := waitLeader(round)
		id := fmt.Sprintf("p%d", leader)
		// The others' views agree while this leader stays.
		if got, err := observer.Leader(ctx); err != nil || got != id {
			t.Errorf("round %d: Leader() = %q, %v; participant %s believes it leads", round, got, err, id)
		}
		for seen := ""; seen != id; {
			v, err := nextWithin(observed, 20*time.Second)
			if err != nil {
				t.Fatalf("round %d: Observe never reported %s (last %q): %v", round, id, seen, err)
			}
			seen = v
		}

		if rand.IntN(3) == 0 {
			// Also expire a participant that is waiting.
			tr.mu.Lock()
			other := tr.sessions[rand.IntN(participants)]
			gone := tr.expiring[other] // expired already, perhaps not known yet
			tr.mu.Unlock()
			if other != nil && other != s && !gone && other.Err() == nil {
				tr.markExpiring(other)
				expireSession(t, e.servers[0], other)
				bystanders++
			}
		}
		if rand.IntN(2) == 0 {
			tr.doubt(leader) // a leader stops acting before it resigns
			must(t, el.Resign(ctx), "round %d: %s: Resign", round, id)
			resigns++
			continue
		}
		tr.markExpiring(s)
		e.expire(s)
		expiries++
		// The expired leader learns it when its client reconnects, which
		// go-zookeeper does after a 1s pause with a single server: the
		// next rounds go on meanwhile, and its Lost is checked below.
		expired[s] = id
	}
	waitLeader(rounds)
	for len(expired) > 0 {
		select {
		case s := <-lostSeen:
			delete(expired, s)
		case <-time.After(zktest.Bound(20 * time.Second)):
			t.Fatalf("expired leaders whose Lost() did not close within 20s: %v", slices.Collect(maps.Values(expired)))
		}
	}
	t.Logf("%d rounds: %d resignations, %d leader expiries, %d waiting participants expired", rounds, resigns, expiries, bystanders)
	stop()
	wg.Wait()
	observed.Close()
	e.empty(path)
}

// TestElectionCrashWakesOneSuccessor queues 10 participants and expires the
// leader's session: exactly one watch event reaches the 9 others, and it
// goes to the next in line, which then leads.
func TestElectionCrashWakesOneSuccessor(t *testing.T) {
	e := newEnv(t)
	const n = 10
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	base := e.watches()
	ss := make([]*zkrecipes.Session, n)
	els := make([]*zkrecipes.Election, n)
	done := make([]<-chan error, n)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for i := range n {
		ss[i] = e.session()
		els[i] = zkrecipes.NewElection(ss[i], path, fmt.Sprintf("p%d", i))
		el := els[i]
		done[i] = async(func() error { return el.Campaign(wctx) })
		e.waitFor("participant to queue", func() bool { return len(e.children(path)) == i+1 })
	}
	must(t, result(t, done[0], "p0 Campaign"), "p0: Campaign")
	// p1..p9 each watch their predecessor; p0 watches its own node.
	e.waitFor("all watches", func() bool { return e.watches() >= base+n })
	roundTrip(t, ss[1:]...)
	before := events(ss[1:])

	e.expire(ss[0])
	must(t, result(t, done[1], "p1 Campaign"), "p1: Campaign after p0's session expired")
	closed(t, els[0].Lost(), "p0's Lost after its session expired")
	roundTrip(t, ss[1:]...)
	after := events(ss[1:])
	var total int64
	for i := range after {
		d := after[i] - before[i]
		total += d
		if i > 0 && d != 0 {
			t.Errorf("p%d received %d watch events for p0's crash, want 0", i+1, d)
		}
	}
	if total != 1 {
		t.Errorf("p0's crash sent %d watch events to the others, want 1", total)
	}
	for i := 2; i < n; i++ {
		blocked(t, done[i], fmt.Sprintf("p%d Campaign", i))
	}
	if got, err := els[5].Leader(ctx); err != nil || got != "p1" {
		t.Errorf("Leader() = %q, %v; want p1", got, err)
	}
	wcancel()
	for i := 2; i < n; i++ {
		if err := result(t, done[i], "cancelled Campaign"); !errors.Is(err, context.Canceled) {
			t.Errorf("p%d: cancelled Campaign = %v, want Canceled", i, err)
		}
	}
	must(t, els[1].Resign(ctx), "p1: Resign")
	e.empty(path)
}

// TestElectionObserve follows one election through its states: nobody, a,
// b (after a resigns), nobody (after b's session closes).
func TestElectionObserve(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	obs := zkrecipes.NewElection(e.session(), path, "observer")
	ch, err := obs.Observe(ctx)
	must(t, err, "Observe")
	next := func(want string) {
		t.Helper()
		got, err := nextWithin(ch, 20*time.Second)
		if err != nil || got != want {
			t.Fatalf("Observe delivered %q (%v), want %q", got, err, want)
		}
	}
	next("")
	if _, err := obs.Leader(ctx); !errors.Is(err, zkrecipes.ErrNoLeader) {
		t.Errorf("Leader() without candidates = %v, want ErrNoLeader", err)
	}
	a := zkrecipes.NewElection(e.session(), path, "a")
	must(t, a.Campaign(ctx), "a: Campaign")
	next("a")
	bs := e.session()
	b := zkrecipes.NewElection(bs, path, "b")
	bdone := async(func() error { return b.Campaign(ctx) })
	e.waitFor("b to queue", func() bool { return len(e.children(path)) == 2 })
	if got, err := obs.Leader(ctx); err != nil || got != "a" {
		t.Errorf("Leader() = %q, %v; want a", got, err)
	}
	must(t, a.Resign(ctx), "a: Resign")
	must(t, result(t, bdone, "b Campaign"), "b: Campaign")
	next("b")
	bs.Close()
	next("")
	ch.Close()
	if v, err := nextWithin(ch, 10*time.Second); !errors.Is(err, zkrecipes.ErrStreamClosed) {
		t.Errorf("Observe delivered %q, %v after Close, want ErrStreamClosed", v, err)
	}
	e.empty(path)
}

// TestElectionLoss: Lost closes when the leader's node is deleted by
// someone else, and when its session ends; Resign hands over.
func TestElectionLoss(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	a, b := zkrecipes.NewElection(s, path, "a"), zkrecipes.NewElection(e.session(), path, "b")
	select {
	case <-a.Lost():
	default:
		t.Error("Lost() of a participant that does not lead is not closed")
	}
	must(t, a.Campaign(ctx), "a: Campaign")
	if a.Token() == 0 {
		t.Error("Token() = 0 while leading")
	}
	if err := a.Campaign(ctx); !errors.Is(err, zkrecipes.ErrBusy) {
		t.Errorf("second Campaign = %v, want ErrBusy", err)
	}
	bdone := async(func() error { return b.Campaign(ctx) })
	e.waitFor("b to queue", func() bool { return len(e.children(path)) == 2 })
	select {
	case <-a.Lost():
		t.Fatal("Lost closed while leading")
	default:
	}

	// An operator deletes the leader's node: a is told, b leads.
	kids := e.children(path)
	for _, k := range kids {
		if data, _, err := e.admin.Get(path + "/" + k); err == nil && string(data) == "a" {
			must(t, e.admin.Delete(path+"/"+k, -1), "delete a's node")
		}
	}
	closed(t, a.Lost(), "a's Lost after its node was deleted")
	must(t, result(t, bdone, "b Campaign"), "b: Campaign")
	must(t, a.Resign(ctx), "a: Resign after its node was deleted")
	if err := a.Resign(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("second Resign = %v, want ErrNotHeld", err)
	}

	// a queues again behind b; a cancelled campaign leaves no node.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := a.Campaign(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Campaign behind b = %v, want DeadlineExceeded", err)
	}
	cancel()
	if kids := e.children(path); len(kids) != 1 {
		t.Errorf("after a cancelled Campaign: %v, want only b's node", kids)
	}
	// Graceful handover from b to a.
	adone := async(func() error { return a.Campaign(ctx) })
	e.waitFor("a to queue", func() bool { return len(e.children(path)) == 2 })
	must(t, b.Resign(ctx), "b: Resign")
	must(t, result(t, adone, "a Campaign"), "a: Campaign")
	s.Close()
	closed(t, a.Lost(), "a's Lost after Close")
	if err := a.Resign(ctx); !errors.Is(err, zkrecipes.ErrSessionClosed) {
		t.Errorf("Resign after Close = %v, want ErrSessionClosed", err)
	}
	if err := zkrecipes.NewElection(s, path, "").Campaign(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Campaign with an empty id = %v, want ErrInvalidArgument", err)
	}
	if err := zkrecipes.NewElection(s, "bad", "x").Campaign(ctx); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("Campaign on a bad path = %v, want ErrInvalidPath", err)
	}
	e.empty(path)
}

// TestElectionConnectionCutDuringCreate: the candidate's create reaches the
// server but the answer is lost; the node is found by its protected prefix
// and the candidate leads on it, with its id as data.
func TestElectionConnectionCutDuringCreate(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})
	e.mkdirs(path)
	el := zkrecipes.NewElection(s, path, "cut")
	p.CutOnRequest(15, true) // create2
	must(t, el.Campaign(ctx), "Campaign through a cut connection")
	select {
	case <-p.Tripped():
	default:
		t.Fatal("the trap never fired")
	}
	kids := e.children(path)
	if len(kids) != 1 {
		t.Fatalf("nodes: %v, want one", kids)
	}
	data, st, err := e.admin.Get(path + "/" + kids[0])
	must(t, err, "get")
	if string(data) != "cut" || st.EphemeralOwner != s.ID() || el.Token() < st.Czxid {
		t.Errorf("node data %q owner 0x%x czxid %d; want \"cut\", 0x%x, and a token (%d) no lower than czxid", data, st.EphemeralOwner, st.Czxid, s.ID(), el.Token())
	}
	must(t, el.Resign(ctx), "Resign")
	e.empty(path)
}

// TestElectionInterop runs Curator's LeaderLatch, kazoo (as a LeaderLatch
// look-alike) and zkrecipes' Election on one path: every leader marks a
// shared directory, and two at once is a violation. Then Observe follows a
// handover from a Go leader to a Curator one, reading the Java
// participant's id from its node.
func TestElectionInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	path := e.path + "/election"
	args := func(id string, count int, hold time.Duration, marker, start string) []string {
		return argv(t, interop.Args{
			Connect: strings.Join(e.servers, ","), Path: path, Recipe: "latch",
			Count: count, Hold: hold, Marker: marker, ID: id, StartFile: start,
		})
	}

	t.Run("contention", func(t *testing.T) {
		marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
		procs := startReady(t,
			curator(ctx, args("curator-0", 6, 5*time.Millisecond, marker, start)...),
			curator(ctx, args("curator-1", 6, 5*time.Millisecond, marker, start)...),
			interop.Kazoo(ctx, args("kazoo-0", 6, 5*time.Millisecond, marker, start)...),
		)
		must(t, os.WriteFile(start, nil, 0o644), "start barrier")
		var wg sync.WaitGroup
		for i := range 3 {
			// All but the first hand the leadership over by grant,
			// among participants that are never granted.
			var opts []zkrecipes.LockOption
			if i > 0 {
				opts = append(opts, zkrecipes.WithGrants())
			}
			el := zkrecipes.NewElection(e.session(), path, fmt.Sprintf("zkrecipes-%d", i), opts...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range 6 {
					if !check(t, el.Campaign(ctx), "zkrecipes-%d: Campaign", i) {
						return
					}
					holdExclusive(t, marker, fmt.Sprintf("zkrecipes-%d", i), n)
					check(t, el.Resign(ctx), "zkrecipes-%d: Resign", i)
				}
			}()
		}
		wg.Wait()
		for _, p := range procs {
			p.wait(t)
		}
		e.empty(path)
	})

	t.Run("observe a Java leader", func(t *testing.T) {
		marker := t.TempDir()
		goLeader := zkrecipes.NewElection(e.session(), path, "go-leader")
		must(t, goLeader.Campaign(ctx), "Go: Campaign")
		seen, err := zkrecipes.NewElection(e.session(), path, "observer").Observe(ctx)
		must(t, err, "Observe")
		defer seen.Close()
		if got, err := nextWithin(seen, 30*time.Second); got != "go-leader" {
			t.Fatalf("Observe = %q, %v, want go-leader", got, err)
		}
		// The Java participant holds long enough to be seen, then leaves.
		java := startReady(t, curator(ctx, args("curator-solo", 1, 2*time.Second, marker, "")...))[0]
		e.waitFor("the Java participant to queue", func() bool { return len(e.children(path)) == 2 })
		must(t, goLeader.Resign(ctx), "Go: Resign")
		for _, want := range []string{"curator-solo", ""} {
			got, err := nextWithin(seen, 30*time.Second)
			if err != nil {
				t.Fatalf("Observe did not report %q: %v", want, err)
			}
			if got != want {
				t.Errorf("Observe = %q, want %q", got, want)
			}
		}
		java.wait(t)
		seen.Close()
		e.empty(path)
	})
}

// BenchmarkElectionHandover measures a graceful handover: from the leader's
// call to Resign until the next candidate's Campaign returns. Two sessions
// take turns; before each measured handover the waiting candidate's watch
// is confirmed on the server (wchp), so only the handover is timed.
func BenchmarkElectionHandover(b *testing.B) {
	if sharedErr != nil {
		zktest.SkipOrFail(b, sharedErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Minute))
	defer cancel()
	path := "/bench/" + unsafeChars.ReplaceAllString(b.Name(), "_")
	addr := shared.Addrs()[0]
	els := make([]*zkrecipes.Election, 2)
	ids := make([]int64, 2)
	for i := range els {
		s, err := zkrecipes.NewSession(ctx, shared.Addrs())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		els[i] = zkrecipes.NewElection(s, path, fmt.Sprintf("p%d", i))
		ids[i] = s.ID()
	}
	if err := els[0].Campaign(ctx); err != nil {
		b.Fatal(err)
	}
	leader := 0
	// queue starts the other participant's campaign and waits until it
	// watches the leader's node (besides the leader's own watch on it).
	queue := func() <-chan error {
		next := els[1-leader]
		done := async(func() error { return next.Campaign(ctx) })
		node := leaderNode(b, addr, path, ids[leader])
		deadline := time.Now().Add(20 * time.Second)
		for watchersOf(b, addr, node) < 2 {
			if time.Now().After(deadline) {
				b.Fatalf("the waiting candidate never watched %s", node)
			}
			time.Sleep(time.Millisecond)
		}
		return done
	}
	done := queue()
	b.ResetTimer()
	for range b.N {
		b.StartTimer()
		if err := els[leader].Resign(ctx); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		leader = 1 - leader
		done = queue()
	}
	if err := els[leader].Resign(ctx); err != nil {
		b.Fatal(err)
	}
	<-done
	els[1-leader].Resign(ctx)
}

// leaderNode finds the path of the node the session owner owns.
func leaderNode(b *testing.B, addr, path string, owner int64) string {
	c := plainConn(b, []string{addr})
	defer c.c.Close()
	kids, _, err := c.Children(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range kids {
		if _, st, err := c.Get(path + "/" + k); err == nil && st.EphemeralOwner == owner {
			return path + "/" + k
		}
	}
	b.Fatalf("no node of session 0x%x under %s", owner, path)
	return ""
}

// TestElectionObserveNewLeadership: a leadership handed to another
// participant advertising the same value is a change, reported again.
func TestElectionObserveNewLeadership(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	obs, err := zkrecipes.NewElection(e.session(), path, "observer").Observe(ctx)
	must(t, err, "Observe")
	defer obs.Close()
	next := func(want string) {
		t.Helper()
		if got, err := nextWithin(obs, 20*time.Second); err != nil || got != want {
			t.Fatalf("Observe delivered %q (%v), want %q", got, err, want)
		}
	}
	next("")
	first := zkrecipes.NewElection(e.session(), path, "same")
	must(t, first.Campaign(ctx), "first: Campaign")
	next("same")
	second := zkrecipes.NewElection(e.session(), path, "same")
	done := async(func() error { return second.Campaign(ctx) })
	e.waitFor("the second to queue", func() bool { return len(e.children(path)) == 2 })
	must(t, first.Resign(ctx), "first: Resign")
	must(t, result(t, done, "second: Campaign"), "second: Campaign")
	next("same")
	must(t, second.Resign(ctx), "second: Resign")
	next("")
	e.empty(path)
}
