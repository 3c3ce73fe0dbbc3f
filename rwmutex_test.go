package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestRWMutexReadersShare has 8 readers hold at once: each waits, holding,
// until all 8 hold. Readers excluding each other would never get there.
func TestRWMutexReadersShare(t *testing.T) {
	e := newEnv(t)
	const readers = 8
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	var holding atomic.Int32
	all := make(chan struct{})
	var wg sync.WaitGroup
	for i := range readers {
		m := zkrecipes.NewRWMutex(e.session(), lock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.RLock(ctx); err != nil {
				t.Errorf("reader %d: RLock: %v", i, err)
				return
			}
			if holding.Add(1) == readers {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(zktest.Bound(20 * time.Second)):
				t.Errorf("reader %d: only %d of %d readers hold together", i, holding.Load(), readers)
			}
			check(t, m.RUnlock(ctx), "reader %d: RUnlock", i)
		}()
	}
	wg.Wait()
	e.empty(lock)
}

// rwGuard fails the test when a writer is inside with anybody else, and
// checks the fencing tokens: a writer's is above every earlier holder's, a
// reader's above every earlier writer's.
type rwGuard struct {
	t                 *testing.T
	readers, writers  atomic.Int32
	mu                sync.Mutex
	maxAll, maxWriter int64
	maxReaders        int32
	reads, writes     int
}

func (g *rwGuard) enter(who string, reader bool, token int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if reader {
		n := g.readers.Add(1)
		g.maxReaders = max(g.maxReaders, n)
		if w := g.writers.Load(); w != 0 {
			g.t.Errorf("%s read-locked while a writer held", who)
		}
		if token <= g.maxWriter {
			g.t.Errorf("%s: reader token %d not above the last writer's %d", who, token, g.maxWriter)
		}
		g.reads++
	} else {
		if n := g.writers.Add(1); n != 1 {
			g.t.Errorf("%s write-locked while another writer held", who)
		}
		if r := g.readers.Load(); r != 0 {
			g.t.Errorf("%s write-locked while %d readers held", who, r)
		}
		if token <= g.maxAll {
			g.t.Errorf("%s: writer token %d not above the earlier holders' %d", who, token, g.maxAll)
		}
		g.maxWriter = token
		g.writes++
	}
	g.maxAll = max(g.maxAll, token)
}

func (g *rwGuard) leave(reader bool) {
	if reader {
		g.readers.Add(-1)
	} else {
		g.writers.Add(-1)
	}
}

// TestRWMutexExclusion has 8 sessions take the read or the write lock at
// random: a writer is exclusive against readers and writers.
func TestRWMutexExclusion(t *testing.T) {
	e := newEnv(t)
	const sessions, rounds = 8, 25
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, 2*time.Minute)
	g := &rwGuard{t: t}
	var wg sync.WaitGroup
	for i := range sessions {
		m := zkrecipes.NewRWMutex(e.session(), lock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				reader := rand.IntN(3) != 0
				lock, unlock := m.Lock, m.Unlock
				if reader {
					lock, unlock = m.RLock, m.RUnlock
				}
				if err := lock(ctx); err != nil {
					t.Errorf("session %d round %d: lock(reader=%v): %v", i, r, reader, err)
					return
				}
				g.enter(fmt.Sprintf("session %d round %d", i, r), reader, m.Token())
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				g.leave(reader)
				if err := unlock(ctx); err != nil {
					t.Errorf("session %d round %d: unlock: %v", i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if g.reads+g.writes != sessions*rounds {
		t.Errorf("%d acquisitions, want %d", g.reads+g.writes, sessions*rounds)
	}
	t.Logf("%d reads (up to %d at once), %d writes", g.reads, g.maxReaders, g.writes)
	e.empty(lock)
}

// TestRWMutexWriterNotStarved: a reader that arrives while a writer waits
// for an earlier reader waits for that writer, though only a reader holds.
func TestRWMutexWriterNotStarved(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	r0, w1, r2 := zkrecipes.NewRWMutex(e.session(), lock), zkrecipes.NewRWMutex(e.session(), lock), zkrecipes.NewRWMutex(e.session(), lock)
	base := e.lockBase(ctx, r0.RLock, "r0: RLock")
	w1done := async(func() error { return w1.Lock(ctx) })
	e.waitFor("w1 to watch r0", func() bool { return e.watches() >= base+1 })
	r2done := async(func() error { return r2.RLock(ctx) })
	// r2 is waiting once it watches w1: a reader that ignored the waiting
	// writer would hold at once and never set that watch.
	e.waitFor("r2 to watch w1", func() bool { return e.watches() >= base+2 })
	blocked(t, w1done, "w1 Lock while r0 reads")
	blocked(t, r2done, "r2 RLock behind the waiting writer w1")

	must(t, r0.RUnlock(ctx), "r0: RUnlock")
	must(t, result(t, w1done, "w1 Lock"), "w1: Lock")
	blocked(t, r2done, "r2 RLock while w1 writes")
	must(t, w1.Unlock(ctx), "w1: Unlock")
	must(t, result(t, r2done, "r2 RLock"), "r2: RLock")
	if r2.Token() <= w1.Token() {
		t.Errorf("r2's token %d not above w1's %d", r2.Token(), w1.Token())
	}
	must(t, r2.RUnlock(ctx), "r2: RUnlock")
	e.empty(lock)
}

// TestRWMutexReleaseWakesOnlyNewHolders queues W0 (holding) R1 R2 R3 W4 R5
// R6. W0's release must wake R1-R3, which then hold, and nobody else: R5
// and R6 watch W4, their nearest earlier writer, not W0 (Curator's readers
// would all watch W0).
func TestRWMutexReleaseWakesOnlyNewHolders(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	w0 := zkrecipes.NewRWMutex(e.session(), lock)
	base := e.lockBase(ctx, w0.Lock, "W0: Lock")

	roles := []string{"R1", "R2", "R3", "W4", "R5", "R6"}
	ss := make([]*zkrecipes.Session, len(roles))
	ms := make([]*zkrecipes.RWMutex, len(roles))
	done := make([]<-chan error, len(roles))
	for i, role := range roles {
		ss[i] = e.session()
		ms[i] = zkrecipes.NewRWMutex(ss[i], lock)
		m := ms[i]
		if role[0] == 'R' {
			done[i] = async(func() error { return m.RLock(ctx) })
		} else {
			done[i] = async(func() error { return m.Lock(ctx) })
		}
		e.waitFor(role+" to queue", func() bool { return len(e.children(lock)) == i+2 })
	}
	kids := e.children(lock)
	e.waitFor("all to watch", func() bool {
		// W0 watched by R1-R3, R3 by W4, W4 by R5 and R6.
		return e.watches() >= base+6
	})
	roundTrip(t, ss...)
	before := events(ss)

	must(t, w0.Unlock(ctx), "W0: Unlock")
	for i := range 3 {
		must(t, result(t, done[i], roles[i]), "%s: RLock", roles[i])
	}
	roundTrip(t, ss...)
	after := events(ss)
	for i, role := range roles {
		want := int64(0)
		if i < 3 {
			want = 1
		}
		if got := after[i] - before[i]; got != want {
			t.Errorf("%s received %d watch events for W0's release, want %d", role, got, want)
		}
	}
	for i := 3; i < 6; i++ {
		blocked(t, done[i], roles[i])
	}
	if t.Failed() {
		t.Logf("queue: %v", kids)
	}

	for i := range 3 {
		must(t, ms[i].RUnlock(ctx), "%s: RUnlock", roles[i])
	}
	must(t, result(t, done[3], "W4"), "W4: Lock")
	blocked(t, done[4], "R5")
	blocked(t, done[5], "R6")
	must(t, ms[3].Unlock(ctx), "W4: Unlock")
	for i := 4; i < 6; i++ {
		must(t, result(t, done[i], roles[i]), "%s: RLock", roles[i])
		must(t, ms[i].RUnlock(ctx), "%s: RUnlock", roles[i])
	}
	e.empty(lock)
}

// TestRWMutexKazooNames: kazoo's stock reader ("__rlock__") and writer
// ("__lock__") nodes count as a reader and a writer.
func TestRWMutexKazooNames(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	e.mkdirs(lock)
	s := e.session()
	holdFor := func(what string, lockIt func(context.Context) error, wantWait bool) {
		t.Helper()
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if wantWait { // a deadline only where waiting is the right answer
			tctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
		}
		defer cancel()
		err := lockIt(tctx)
		if wantWait && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want it to wait (DeadlineExceeded)", what, err)
		}
		if !wantWait && err != nil {
			t.Errorf("%s = %v, want it to hold at once", what, err)
		}
	}
	for _, c := range []struct {
		name        string
		readerWaits bool
	}{
		{"0123456789abcdef0123456789abcdef__rlock__", false},
		{"0123456789abcdef0123456789abcdef__lock__", true},
	} {
		node, err := e.admin.Create(lock+"/"+c.name, nil, zkclient.EphemeralSequential, openACL)
		must(t, err, "create %s", c.name)
		r, w := zkrecipes.NewRWMutex(s, lock), zkrecipes.NewRWMutex(s, lock)
		holdFor("Lock behind "+c.name, w.Lock, true)
		holdFor("RLock behind "+c.name, r.RLock, c.readerWaits)
		if !c.readerWaits {
			must(t, r.RUnlock(ctx), "RUnlock")
		}
		if kids := e.children(lock); len(kids) != 1 {
			t.Errorf("nodes left: %v, want only %s", kids, node)
		}
		must(t, e.admin.Delete(node, -1), "delete %s", node)
	}
	e.empty(lock)
}

func TestRWMutexMisuse(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	m := zkrecipes.NewRWMutex(s, lock)

	must(t, m.RLock(ctx), "RLock")
	if err := m.Lock(ctx); !errors.Is(err, zkrecipes.ErrUpgrade) {
		t.Errorf("Lock while reading = %v, want ErrUpgrade", err)
	}
	if err := m.RLock(ctx); !errors.Is(err, zkrecipes.ErrBusy) {
		t.Errorf("second RLock = %v, want ErrBusy", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Unlock while reading = %v, want ErrNotHeld", err)
	}
	must(t, m.RUnlock(ctx), "RUnlock")
	if err := m.RUnlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("second RUnlock = %v, want ErrNotHeld", err)
	}

	must(t, m.Lock(ctx), "Lock")
	if err := m.RLock(ctx); !errors.Is(err, zkrecipes.ErrBusy) || !strings.Contains(err.Error(), "downgrade") {
		t.Errorf("RLock while writing = %v, want ErrBusy explaining there is no downgrade", err)
	}
	if err := m.RUnlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("RUnlock while writing = %v, want ErrNotHeld", err)
	}
	if kids := e.children(lock); len(kids) != 1 {
		t.Errorf("refused calls left nodes: %v", kids)
	}

	// A cancelled waiter leaves no node.
	other := zkrecipes.NewRWMutex(e.session(), lock)
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := other.RLock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RLock behind a writer = %v, want DeadlineExceeded", err)
	}
	if kids := e.children(lock); len(kids) != 1 {
		t.Errorf("after the cancelled RLock: %v, want only the writer's node", kids)
	}

	// Expiry voids the holding.
	select {
	case <-m.Lost():
		t.Fatal("Lost closed while held")
	default:
	}
	e.expire(s)
	closed(t, m.Lost(), "Lost after expiry")
	<-s.Done()
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Unlock after expiry = %v, want ErrSessionExpired", err)
	}
	for _, p := range []string{"", "rel", "/a/"} {
		if err := zkrecipes.NewRWMutex(s, p).RLock(ctx); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("RLock on %q = %v, want ErrInvalidPath", p, err)
		}
	}
	e.empty(lock)
}

// TestRWMutexInterop runs Curator's InterProcessReadWriteLock (both sides),
// kazoo's ReadLock and WriteLock and zkrecipes' RWMutex on one path at the
// same time. Every holder marks a shared directory; a reader beside a
// writer, or two writers together, is a violation.
func TestRWMutexInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)

	type contender struct {
		id, recipe string
		java       bool
	}
	cases := []struct {
		name       string
		others     []contender
		stockKazoo bool
	}{
		// kazoo with Curator's node names: all three see each other.
		{name: "curator+kazoo+zkrecipes", others: []contender{
			{"curator-r", "read", true}, {"curator-w", "write", true},
			{"kazoo-r", "read", false}, {"kazoo-w", "write", false},
		}},
		// kazoo's own writer names ("__lock__"): zkrecipes counts them as
		// writers. Curator does not (it would order them by their random
		// prefix), so it stays out of this mix, and so does kazoo's stock
		// reader, which has a deadlock of its own (kazoo#649).
		{name: "stock-kazoo-writers+zkrecipes", stockKazoo: true, others: []contender{
			{"kazoo-w0", "write", false}, {"kazoo-w1", "write", false},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lock := e.path + "/" + c.name
			marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
			var cmds []*exec.Cmd
			for _, o := range c.others {
				argv := argv(t, interop.Args{
					Connect: strings.Join(e.servers, ","), Path: lock, Recipe: o.recipe,
					Count: 8, Hold: 5 * time.Millisecond, Marker: marker, ID: o.id,
					StartFile: start, KazooStockNaming: c.stockKazoo,
				})
				if o.java {
					cmds = append(cmds, curator(ctx, argv...))
				} else {
					cmds = append(cmds, interop.Kazoo(ctx, argv...))
				}
			}
			procs := startReady(t, cmds...)
			must(t, os.WriteFile(start, nil, 0o644), "start barrier")
			runRWContenders(t, ctx, e, lock, marker, 4, 8)
			for _, p := range procs {
				p.wait(t)
			}
			e.empty(lock)
		})
	}
}

// runRWContenders runs n zkrecipes contenders, half readers and half
// writers, each taking its side of the lock count times and marking the
// marker directory as the interop contenders do.
func runRWContenders(t *testing.T, ctx context.Context, e *env, lock, marker string, n, count int) {
	var wg sync.WaitGroup
	for i := range n {
		reader := i%2 == 0
		m := zkrecipes.NewRWMutex(e.session(), lock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("zkrecipes-%d", i)
			for n := 1; n <= count; n++ {
				if reader {
					if !check(t, m.RLock(ctx), "%s: RLock", id) {
						return
					}
					mine, err := markShared(marker, id, n)
					if err != nil {
						t.Errorf("%s round %d: %v", id, n, err)
					}
					time.Sleep(5 * time.Millisecond)
					os.Remove(mine)
					check(t, m.RUnlock(ctx), "%s: RUnlock", id)
					continue
				}
				if !check(t, m.Lock(ctx), "%s: Lock", id) {
					return
				}
				holdExclusive(t, marker, id, n)
				check(t, m.Unlock(ctx), "%s: Unlock", id)
			}
		}()
	}
	wg.Wait()
}
