package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// guard records who is inside a critical section and fails the test when
// two are.
type guard struct {
	t       *testing.T
	inside  atomic.Int32
	mu      sync.Mutex
	last    int64
	entries int
}

func (g *guard) enter(who string, token int64) {
	if n := g.inside.Add(1); n != 1 {
		g.t.Errorf("%s entered while %d others held the lock", who, n-1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if token <= g.last {
		g.t.Errorf("%s got token %d, not above the previous holder's %d", who, token, g.last)
	}
	g.last = token
	g.entries++
}

func (g *guard) leave() { g.inside.Add(-1) }

func TestMutexExclusion(t *testing.T) {
	e := newEnv(t)
	const sessions, rounds = 20, 50
	lock := e.path + "/lock"
	g := &guard{t: t}
	ctx := ctxTimeout(t, 3*time.Minute)
	var wg sync.WaitGroup
	for i := range sessions {
		s := e.session()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := zkrecipes.NewMutex(s, lock)
			for r := range rounds {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("session %d round %d: Lock: %v", i, r, err)
					return
				}
				g.enter(fmt.Sprintf("session %d", i), m.Token())
				g.leave()
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("session %d round %d: Unlock: %v", i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if g.entries != sessions*rounds {
		t.Errorf("%d acquisitions completed, want %d", g.entries, sessions*rounds)
	}
	e.empty(lock)
}

func TestMutexHolderSessionExpires(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	a, b := e.session(), e.session()
	ma, mb := zkrecipes.NewMutex(a, lock), zkrecipes.NewMutex(b, lock)
	must(t, ma.Lock(ctx), "a: Lock")
	tokenA := ma.Token()

	got := make(chan error, 1)
	go func() { got <- mb.Lock(ctx) }()
	e.waitFor("b to queue", func() bool { return len(e.children(lock)) == 2 })
	select {
	case err := <-got:
		t.Fatalf("b got the lock while a held it (err=%v)", err)
	case <-time.After(100 * time.Millisecond):
	}

	e.expire(a)
	select {
	case err := <-got:
		must(t, err, "b: Lock after a expired")
	case <-ctx.Done():
		t.Fatal("b never got the lock after a's session expired")
	}
	if mb.Token() <= tokenA {
		t.Errorf("b's token %d is not above a's %d", mb.Token(), tokenA)
	}
	select {
	case <-ma.Lost():
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Fatal("a's Lost() not closed after its session expired")
	}
	<-a.Done()
	if err := ma.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("a: Unlock after expiry = %v, want ErrSessionExpired", err)
	}
	if err := ma.Lock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("a: Lock after expiry = %v, want ErrSessionExpired", err)
	}
	if err := zkrecipes.NewMutex(a, lock).TryLock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("a: TryLock after expiry = %v, want ErrSessionExpired", err)
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

func TestMutexCancelAndTimeoutLeaveNoNode(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock)
	must(t, holder.Lock(ctx), "holder: Lock")
	s := e.session()

	t.Run("timeout", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := zkrecipes.NewMutex(s, lock).Lock(tctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock = %v, want DeadlineExceeded", err)
		}
		if kids := e.children(lock); len(kids) != 1 {
			t.Errorf("after timeout: %v, want only the holder's node", kids)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		m := zkrecipes.NewMutex(s, lock)
		done := make(chan error, 1)
		go func() { done <- m.Lock(cctx) }()
		e.waitFor("waiter to queue", func() bool { return len(e.children(lock)) == 2 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want Canceled", err)
		}
		if kids := e.children(lock); len(kids) != 1 {
			t.Errorf("after cancel: %v, want only the holder's node", kids)
		}
	})
	t.Run("cancel at once", func(t *testing.T) {
		// Cancelled while the create is in flight: the node, if the
		// server made it, must still be removed.
		for range 20 {
			cctx, cancel := context.WithCancel(ctx)
			go cancel()
			zkrecipes.NewMutex(s, lock).Lock(cctx)
			if kids := e.children(lock); len(kids) != 1 {
				t.Fatalf("after cancel: %v, want only the holder's node", kids)
			}
		}
	})
	t.Run("trylock", func(t *testing.T) {
		before := s.Stats()
		err := zkrecipes.NewMutex(s, lock).TryLock(ctx)
		if !errors.Is(err, zkrecipes.ErrLocked) {
			t.Fatalf("TryLock on a held lock = %v, want ErrLocked", err)
		}
		if kids := e.children(lock); len(kids) != 1 {
			t.Errorf("after TryLock: %v, want only the holder's node", kids)
		}
		if d := s.Stats().Creates - before.Creates; d != 0 {
			t.Errorf("TryLock on a held lock sent %d creates, want 0", d)
		}
	})
	must(t, holder.Unlock(ctx), "holder: Unlock")
	t.Run("trylock free", func(t *testing.T) {
		m := zkrecipes.NewMutex(s, lock)
		must(t, m.TryLock(ctx), "TryLock on a free lock")
		must(t, m.Unlock(ctx), "Unlock")
	})
	e.empty(lock)
}

func TestMutexConnectionCutDuringCreate(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})
	other := zkrecipes.NewMutex(e.session(), lock)

	for _, forward := range []bool{true, false} {
		t.Run(fmt.Sprintf("create reached server=%v", forward), func(t *testing.T) {
			m := zkrecipes.NewMutex(s, lock)
			must(t, other.Lock(ctx), "warm up: other Lock") // the path exists, so the next create is the node's
			must(t, other.Unlock(ctx), "warm up: other Unlock")
			p.CutOnRequest(15, forward) // opcode 15: create2, which answers with the node's Stat
			must(t, m.Lock(ctx), "Lock through a cut connection")
			select {
			case <-p.Tripped():
			default:
				t.Fatal("the trap never fired: the create did not go through the proxy")
			}
			kids := e.children(lock)
			id := s.ID()
			if len(kids) != 1 {
				t.Fatalf("nodes after the cut create: %v, want exactly one", kids)
			}
			_, st, err := e.admin.Get(lock + "/" + kids[0])
			must(t, err, "get %s", kids[0])
			if st.EphemeralOwner != id {
				t.Errorf("node owned by 0x%x, want our session 0x%x", st.EphemeralOwner, id)
			}
			must(t, m.Unlock(ctx), "Unlock")
			e.empty(lock)
			// The lock still works for everybody.
			must(t, other.Lock(ctx), "other: Lock")
			must(t, other.Unlock(ctx), "other: Unlock")
		})
	}
	e.empty(lock)
}

func TestMutexPredecessorVanishesBeforeWatch(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, 2*time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock)
	s := e.session()
	for i := range 50 {
		must(t, holder.Lock(ctx), "round %d: holder Lock", i)
		// A contender between the holder and the waiter, which the test
		// deletes exactly between the waiter's listing and its watch.
		mid, err := e.admin.Create(lock+"/_c_00000000-0000-0000-0000-000000000000-lock-", nil, zkclient.EphemeralSequential, openACL)
		must(t, err, "round %d: create middle node", i)
		m := zkrecipes.NewMutex(s, lock)
		var raced atomic.Int32
		zkrecipes.SetBeforeWatch(m, func(pred string) {
			if pred == mid {
				must(t, e.admin.Delete(mid, -1), "delete middle")
				raced.Add(1)
			}
		})
		done := make(chan error, 1)
		go func() { done <- m.Lock(ctx) }()
		e.waitFor("the race to be forced", func() bool { return raced.Load() == 1 })
		time.Sleep(time.Millisecond)
		must(t, holder.Unlock(ctx), "round %d: holder Unlock", i)
		select {
		case err := <-done:
			must(t, err, "round %d: waiter Lock", i)
		case <-time.After(zktest.Bound(20 * time.Second)):
			t.Fatalf("round %d: waiter hangs after its predecessor vanished before the watch", i)
		}
		must(t, m.Unlock(ctx), "round %d: waiter Unlock", i)
	}
	e.empty(lock)
}

// TestMutexNoHerd queues 200 waiters and counts what each release costs:
// exactly one watch event, and at most two listings per acquisition.
func TestMutexNoHerd(t *testing.T) {
	e := newEnv(t)
	const waiters = 200
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, 3*time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock)
	baseline := e.lockBase(ctx, holder.Lock, "holder: Lock")
	sessions := make([]*zkrecipes.Session, waiters)
	for i := range sessions {
		sessions[i] = e.session()
	}
	var wg sync.WaitGroup
	var order sync.Mutex
	acquired := 0
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := zkrecipes.NewMutex(s, lock)
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order.Lock()
			acquired++
			order.Unlock()
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		}()
	}
	e.waitFor("all waiters to queue", func() bool { return len(e.children(lock)) == waiters+1 })
	e.waitFor("all waiters to watch", func() bool { return e.watches() >= baseline+waiters })
	before := make([]zkrecipes.Stats, waiters)
	for i, s := range sessions {
		before[i] = s.Stats()
	}
	must(t, holder.Unlock(ctx), "holder: Unlock")
	wg.Wait()

	var events, listings int64
	for i, s := range sessions {
		st := s.Stats()
		events += st.WatchEvents - before[i].WatchEvents
		listings += st.Listings
		if st.Listings > 2 {
			t.Errorf("waiter %d listed the children %d times for one acquisition", i, st.Listings)
		}
	}
	// Releases that woke somebody: the holder's and those of all waiters
	// but the last.
	releases := int64(waiters)
	if acquired != waiters {
		t.Fatalf("%d of %d waiters acquired", acquired, waiters)
	}
	if events != releases {
		t.Errorf("waiters received %d watch events for %d releases, want exactly one per release", events, releases)
	}
	t.Logf("%d releases: %d watch events, %d listings in all", releases, events, listings)
	e.empty(lock)
}

func TestMutexBadInput(t *testing.T) {
	e := newEnv(t)
	s := e.session()
	ctx := ctxTimeout(t, time.Minute)
	before := s.Stats()
	for _, p := range []string{"", "relative/path", "/trailing/", "/empty//segment", "/nul\x00byte", "/", "/a/./b", "/zookeeper/x"} {
		m := zkrecipes.NewMutex(s, p)
		for name, err := range map[string]error{"Lock": m.Lock(ctx), "TryLock": m.TryLock(ctx), "Unlock": m.Unlock(ctx)} {
			if !errors.Is(err, zkrecipes.ErrInvalidPath) {
				t.Errorf("%s(%q) = %v, want ErrInvalidPath", name, p, err)
			} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
				t.Errorf("%s(%q): error %q does not name the path", name, p, err)
			}
		}
	}
	if after := s.Stats(); after != before {
		t.Errorf("bad paths caused requests: %+v -> %+v", before, after)
	}
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Unlock of a mutex not held = %v, want ErrNotHeld", err)
	}
	must(t, m.Lock(ctx), "Lock")
	if err := m.Lock(ctx); !errors.Is(err, zkrecipes.ErrBusy) {
		t.Errorf("second Lock on a held Mutex = %v, want ErrBusy", err)
	}
	must(t, m.Unlock(ctx), "Unlock")
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	if _, err := zkrecipes.NewSession(ctx, nil); err == nil {
		t.Error("NewSession with no servers succeeded")
	}
	e.empty(e.path + "/lock")
}

func TestMutexLostOnClose(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	select {
	case <-m.Lost():
	default:
		t.Error("Lost() of a mutex not held is not closed")
	}
	must(t, m.Lock(ctx), "Lock")
	if m.Token() == 0 {
		t.Error("Token() = 0 while held")
	}
	select {
	case <-m.Lost():
		t.Fatal("Lost() closed while held")
	default:
	}
	s.Close()
	select {
	case <-m.Lost():
	case <-time.After(zktest.Bound(5 * time.Second)):
		t.Fatal("Lost() not closed after Close")
	}
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionClosed) {
		t.Errorf("Unlock after Close = %v, want ErrSessionClosed", err)
	}
	e.empty(e.path + "/lock")
}

// TestMutexStrictLoss cuts the holder off from the server (bytes dropped):
// in strict mode Lost closes before the server could have expired the
// session; without strict mode it waits for the session's fate.
func TestMutexStrictLoss(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	p := e.proxy()
	const timeout = 4 * time.Second
	strict := e.sessionOn([]string{p.Addr()}, zkrecipes.WithStrict(), zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(timeout)))
	m := zkrecipes.NewMutex(strict, lock)
	must(t, m.Lock(ctx), "Lock")

	p.Blackhole()
	start := time.Now()
	select {
	case <-m.Lost():
		if d := time.Since(start); d >= strict.Timeout() {
			t.Errorf("strict Lost after %v, not before the session timeout %v", d, strict.Timeout())
		}
	case <-time.After(2 * timeout):
		t.Fatal("strict Lost() not closed while cut off")
	}
	p.Pass()
	p.Cut() // make the client reconnect now
	e.waitFor("reconnection", strict.Connected)
	if strict.Err() != nil {
		t.Fatalf("session ended: %v", strict.Err())
	}
	// The node is still there: the holder releases it.
	must(t, m.Unlock(ctx), "Unlock after strict loss")
	e.empty(lock)
}
