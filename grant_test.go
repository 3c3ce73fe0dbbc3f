package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The grant (WithGrants): a Mutex holder hands the lock to the contender
// right after it in the multi that deletes its node.

// waitQueued waits until lock has n contenders and each but the last is
// watched by the one after it (the first, the holder, also by itself):
// every waiter has listed and set its watch.
func (e *env) waitQueued(lock string, n int) {
	e.t.Helper()
	zktest.Eventually(e.t, 30*time.Second, fmt.Sprintf("%d contenders queued and watching under %s", n, lock), func() error {
		kids := e.sortedChildren(lock)
		if len(kids) != n {
			return fmt.Errorf("%d contenders", len(kids))
		}
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
		defer cancel()
		w, err := zkadmin.Wchp(ctx, e.servers[0])
		if err != nil {
			return err
		}
		for i, k := range kids[:n-1] {
			want := 1
			if i == 0 {
				want = 2
			}
			if got := len(w[lock+"/"+k]); got < want {
				return fmt.Errorf("%s has %d watchers, want %d", k, got, want)
			}
		}
		return nil
	})
}

// sortedChildren returns lock's contenders in queue order.
func (e *env) sortedChildren(lock string) []string {
	kids := e.children(lock)
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return kids
}

// grantNodes returns the grants left under lock's grants directory.
func (e *env) grantNodes(lock string) []string {
	var out []string
	for _, key := range e.children(lock + ".grants") {
		for _, g := range e.children(lock + ".grants/" + key) {
			if g != "owner" { // the session's own node: see TestGrantDirectoryGoes
				out = append(out, key+"/"+g)
			}
		}
	}
	return out
}

// queue starts lock (a Lock call) and waits until path has n contenders.
func (e *env) queue(path string, n int, lock func() error) <-chan error {
	e.t.Helper()
	ch := async(lock)
	e.waitFor(fmt.Sprintf("%d contenders under %s", n, path), func() bool { return len(e.children(path)) == n })
	return ch
}

// lineUp makes holder hold a lock whose waiters it knows: a first
// contender (of session first) locks, holder and the waiters (each a Lock
// call) queue in that order, and once each waiter watches its predecessor
// the first lets go: holder holds on a listing that shows them all, its
// heir and run. It returns the waiters' Lock results.
func (e *env) lineUp(ctx context.Context, first *zkrecipes.Session, lock string, holder *zkrecipes.Mutex, waiters ...func() error) []<-chan error {
	e.t.Helper()
	m := zkrecipes.NewMutex(first, lock, zkrecipes.WithGrants())
	must(e.t, m.Lock(ctx), "first: Lock")
	held := e.queue(lock, 2, func() error { return holder.Lock(ctx) })
	var chs []<-chan error
	for i, w := range waiters {
		chs = append(chs, e.queue(lock, 3+i, w))
	}
	e.waitQueued(lock, 2+len(waiters))
	must(e.t, m.Unlock(ctx), "first: Unlock")
	must(e.t, result(e.t, held, "holder: Lock"), "holder: Lock")
	return chs
}

// checkToken fails the test unless m's token is the czxid of the lowest
// node of lock, the holder's.
func (e *env) checkToken(m *zkrecipes.Mutex, lock, who string) {
	e.t.Helper()
	kids := e.sortedChildren(lock)
	if len(kids) == 0 {
		e.t.Fatalf("%s holds but %s is empty", who, lock)
	}
	st, ok, err := e.admin.Exists(lock + "/" + kids[0])
	if err != nil || !ok {
		e.t.Fatalf("%s: stat %s: %v", who, kids[0], err)
	}
	if m.Token() != st.Czxid {
		e.t.Errorf("%s: Token %#x, want its node's czxid %#x", who, m.Token(), st.Czxid)
	}
}

// TestGrantChain queues a holder and 25 waiters that take grants and lets
// the lock pass down the line: a waiter that lists and holds grants to the
// next nine without their listing, so 22 of the 25 hold on a grant. Each
// waiter still gets exactly one watch event (its predecessor's deletion),
// holds in queue order with the czxid of its node as token, and every
// grant is deleted by its heir's release.
func TestGrantChain(t *testing.T) {
	e := newEnv(t)
	const waiters = 25
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, 2*time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock, zkrecipes.WithGrants())
	must(t, holder.Lock(ctx), "holder: Lock")
	sessions := make([]*zkrecipes.Session, waiters)
	ms := make([]*zkrecipes.Mutex, waiters)
	done := make([]chan error, waiters)
	g := &guard{t: t}
	g.last = holder.Token()
	var mu sync.Mutex
	var order []int
	for i := range sessions {
		sessions[i] = e.session()
		ms[i] = zkrecipes.NewMutex(sessions[i], lock, zkrecipes.WithGrants())
		done[i] = make(chan error, 1)
		go func() {
			err := ms[i].Lock(ctx)
			if err == nil {
				g.enter(fmt.Sprintf("waiter %d", i), ms[i].Token())
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				e.checkToken(ms[i], lock, fmt.Sprintf("waiter %d", i))
				g.leave()
				err = ms[i].Unlock(ctx)
			}
			done[i] <- err
		}()
		e.waitFor(fmt.Sprintf("waiter %d to queue", i), func() bool { return len(e.children(lock)) == i+2 })
	}
	e.waitQueued(lock, waiters+1)
	before := make([]zkrecipes.Stats, waiters)
	for i, s := range sessions {
		before[i] = s.Stats()
	}
	must(t, holder.Unlock(ctx), "holder: Unlock")
	for i := range done {
		must(t, result(t, done[i], fmt.Sprintf("waiter %d", i)), "waiter %d", i)
	}
	if !slices.IsSorted(order) || len(order) != waiters {
		t.Errorf("waiters held in the order %v, want queue order", order)
	}
	var granted, grants int64
	for i, s := range sessions {
		st := s.Stats()
		granted += st.Granted
		grants += st.Grants
		if ev := st.WatchEvents - before[i].WatchEvents; ev != 1 {
			t.Errorf("waiter %d received %d watch events, want 1", i, ev)
		}
		wantListings := int64(2)
		if st.Granted == 1 {
			wantListings = 1 // the one sent behind its create
		}
		if st.Listings != wantListings {
			t.Errorf("waiter %d (granted %d) listed %d times, want %d", i, st.Granted, st.Listings, wantListings)
		}
	}
	// Listed: waiters 0, 10 and 20; each granted the nine after it.
	if granted != 22 || grants != 22 {
		t.Errorf("%d acquisitions held on a grant and %d releases granted, want 22 and 22", granted, grants)
	}
	t.Logf("%d waiters: %d held on a grant", waiters, granted)
	e.empty(lock)
	if left := e.grantNodes(lock); len(left) > 0 {
		t.Errorf("grants left after every heir released: %v", left)
	}
}

// TestGrantHeirGone: the heir the holder listed leaves before the holder
// releases (it cancels, its session expires, or someone deletes its node).
// The grant's check fails, the holder deletes its node plainly, and the
// next waiter lists and holds; a heir whose node was deleted never holds.
func TestGrantHeirGone(t *testing.T) {
	for _, how := range []string{"cancel", "expire", "delete"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			lock := e.path + "/lock"
			ctx := ctxTimeout(t, time.Minute)
			hs, ws := e.session(), e.session()
			holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
			heirCtx, cancelHeir := context.WithCancel(ctx)
			defer cancelHeir()
			heirS := e.session()
			heir := zkrecipes.NewMutex(heirS, lock, zkrecipes.WithGrants())
			next := zkrecipes.NewMutex(ws, lock, zkrecipes.WithGrants())
			chs := e.lineUp(ctx, e.session(), lock, holder,
				func() error { return heir.Lock(heirCtx) }, func() error { return next.Lock(ctx) })
			heirDone, nextDone := chs[0], chs[1]
			heirNode := e.sortedChildren(lock)[1]

			switch how {
			case "cancel":
				cancelHeir()
				if err := result(t, heirDone, "heir: Lock"); !errors.Is(err, context.Canceled) {
					t.Fatalf("heir: Lock after cancel = %v, want context.Canceled", err)
				}
			case "expire":
				e.expire(heirS)
			case "delete":
				must(t, e.admin.Delete(lock+"/"+heirNode, -1), "delete the heir's node")
			}
			e.waitFor("the heir's node to go", func() bool { return !slices.Contains(e.children(lock), heirNode) })
			blocked(t, nextDone, "next: Lock")
			must(t, holder.Unlock(ctx), "holder: Unlock")
			must(t, result(t, nextDone, "next: Lock"), "next: Lock")
			if how == "delete" {
				if err := result(t, heirDone, "heir: Lock"); !errors.Is(err, zkrecipes.ErrNodeLost) {
					t.Errorf("heir: Lock after its node was deleted = %v, want ErrNodeLost", err)
				}
			}
			if next.Token() <= holder.Token() && holder.Token() != 0 {
				t.Errorf("next's token %#x not above the holder's", next.Token())
			}
			if st := hs.Stats(); st.Grants != 0 {
				t.Errorf("the holder granted %d times to a heir that was gone", st.Grants)
			}
			if st := ws.Stats(); st.Granted != 0 {
				t.Errorf("next held on a grant (%d), want a listing", st.Granted)
			}
			must(t, next.Unlock(ctx), "next: Unlock")
			e.empty(lock)
		})
	}
}

// TestGrantHeirExpiresHolding: a heir holds on a grant, then its session
// expires. The next waiter, which watched the heir, lists and holds. The
// grant stays, owned by its granter's session, until that session ends.
func TestGrantHeirExpiresHolding(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	hs, heirS := e.session(), e.session()
	holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
	heir := zkrecipes.NewMutex(heirS, lock, zkrecipes.WithGrants())
	next := zkrecipes.NewMutex(e.session(), lock, zkrecipes.WithGrants())
	chs := e.lineUp(ctx, e.session(), lock, holder, func() error { return heir.Lock(ctx) }, func() error { return next.Lock(ctx) })
	heirDone, nextDone := chs[0], chs[1]
	must(t, holder.Unlock(ctx), "holder: Unlock")
	must(t, result(t, heirDone, "heir: Lock"), "heir: Lock")
	if st := heirS.Stats(); st.Granted != 1 {
		t.Fatalf("heir: Granted = %d, want 1", st.Granted)
	}
	e.checkToken(heir, lock, "heir")
	blocked(t, nextDone, "next: Lock")
	if left := e.grantNodes(lock); len(left) != 1 {
		t.Errorf("grants while the heir holds: %v, want its one", left)
	}
	e.expire(heirS)
	closed(t, heir.Lost(), "heir: Lost")
	must(t, result(t, nextDone, "next: Lock"), "next: Lock")
	if next.Token() <= heir.Token() && heir.Token() != 0 {
		t.Errorf("next's token %#x not above the heir's", next.Token())
	}
	e.checkToken(next, lock, "next")
	if left := e.grantNodes(lock); len(left) != 1 {
		t.Errorf("grants after the heir expired: %v, want its one, until the granter's session ends", left)
	}
	must(t, hs.Close(), "close the granter's session")
	e.waitFor("the grant to go with its granter's session", func() bool { return len(e.grantNodes(lock)) == 0 })
	must(t, next.Unlock(ctx), "next: Unlock")
	e.empty(lock)
}

// TestGrantHolderExpires: the holder's session expires before it
// releases. Its heir learns of the deletion, lists, and holds.
func TestGrantHolderExpires(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	hs, heirS := e.session(), e.session()
	holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
	heir := zkrecipes.NewMutex(heirS, lock, zkrecipes.WithGrants())
	heirDone := e.lineUp(ctx, e.session(), lock, holder, func() error { return heir.Lock(ctx) })[0]
	e.expire(hs)
	must(t, result(t, heirDone, "heir: Lock"), "heir: Lock")
	if err := holder.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("holder: Unlock after expiry = %v, want ErrSessionExpired", err)
	}
	if st := heirS.Stats(); st.Granted != 0 {
		t.Errorf("heir held on a grant (%d) from an expired holder", st.Granted)
	}
	e.checkToken(heir, lock, "heir")
	must(t, heir.Unlock(ctx), "heir: Unlock")
	e.empty(lock)
}

// TestGrantPassesOver: contenders that do not take grants (a Mutex without
// WithGrants, with Curator's node layout and a version-4 UUID, as
// Curator's and kazoo's) are never granted, and a run of grants stops
// before them: each takes the lock by listing, and the line keeps order.
func TestGrantPassesOver(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	var ss []*zkrecipes.Session
	var ms []*zkrecipes.Mutex
	for i := range 5 {
		s := e.session()
		opts := []zkrecipes.LockOption{zkrecipes.WithoutGrants()}
		if i%2 == 0 {
			opts = []zkrecipes.LockOption{zkrecipes.WithGrants()}
		}
		ss = append(ss, s)
		ms = append(ms, zkrecipes.NewMutex(s, lock, append(opts, zkrecipes.WithNodeData([]byte(fmt.Sprint("contender ", i))))...))
	}
	// 0 holds; 1 (plain), 2 (grants), 3 (plain), 4 (grants) wait.
	must(t, ms[0].Lock(ctx), "0: Lock")
	var chs []<-chan error
	for i := 1; i < 5; i++ {
		chs = append(chs, e.queue(lock, i+1, func() error { return ms[i].Lock(ctx) }))
	}
	e.waitQueued(lock, 5)
	last := ms[0].Token()
	must(t, ms[0].Unlock(ctx), "0: Unlock")
	for i := 1; i < 5; i++ {
		must(t, result(t, chs[i-1], fmt.Sprint(i, ": Lock")), "%d: Lock", i)
		for j := i + 1; j < 5; j++ {
			blocked(t, chs[j-1], fmt.Sprint(j, ": Lock"))
		}
		kids := e.sortedChildren(lock)
		data, _, err := e.admin.Get(lock + "/" + kids[0])
		must(t, err, "read the holder's node")
		if string(data) != fmt.Sprint("contender ", i) {
			t.Errorf("holder %d's node holds %q", i, data)
		}
		if ms[i].Token() <= last {
			t.Errorf("%d: token %#x not above %#x", i, ms[i].Token(), last)
		}
		last = ms[i].Token()
		must(t, ms[i].Unlock(ctx), "%d: Unlock", i)
	}
	for i, s := range ss {
		if st := s.Stats(); st.Grants != 0 || st.Granted != 0 {
			t.Errorf("%d: %d grants made, %d taken; none was possible", i, st.Grants, st.Granted)
		}
	}
	e.empty(lock)
}

// TestGrantRacesCancel cancels the heir's Lock while the holder releases,
// in many interleavings: the heir either holds or leaves, and either way
// the lock passes on (a heir that was granted as it gave up grants on).
func TestGrantRacesCancel(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, 3*time.Minute)
	hs, heirS, nextS, firstS := e.session(), e.session(), e.session(), e.session()
	rng := rand.New(rand.NewPCG(1, 2))
	outcomes := map[string]int{}
	for round := range 30 {
		holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
		heir := zkrecipes.NewMutex(heirS, lock, zkrecipes.WithGrants())
		next := zkrecipes.NewMutex(nextS, lock, zkrecipes.WithGrants())
		heirCtx, cancelHeir := context.WithCancel(ctx)
		chs := e.lineUp(ctx, firstS, lock, holder, func() error { return heir.Lock(heirCtx) }, func() error { return next.Lock(ctx) })
		heirDone, nextDone := chs[0], chs[1]
		delay := time.Duration(rng.IntN(3000)) * time.Microsecond
		unlocked := async(func() error { return holder.Unlock(ctx) })
		time.Sleep(delay) // an interleaving, not a wait for readiness
		cancelHeir()
		must(t, result(t, unlocked, "holder: Unlock"), "round %d: holder: Unlock", round)
		switch err := result(t, heirDone, "heir: Lock"); {
		case err == nil:
			outcomes["heir held"]++
			must(t, heir.Unlock(ctx), "round %d: heir: Unlock", round)
		case errors.Is(err, context.Canceled):
			outcomes["heir left"]++
		default:
			t.Fatalf("round %d: heir: Lock = %v", round, err)
		}
		must(t, result(t, nextDone, "next: Lock"), "round %d: next: Lock", round)
		e.checkToken(next, lock, "next")
		must(t, next.Unlock(ctx), "round %d: next: Unlock", round)
		e.empty(lock)
	}
	t.Logf("outcomes: %v; grants made %d, taken %d", outcomes, hs.Stats().Grants+heirS.Stats().Grants, heirS.Stats().Granted+nextS.Stats().Granted)
	// A grant that came after its heir left is deleted by the heir's
	// session, which still lives.
	e.waitFor("no grant left", func() bool { return len(e.grantNodes(lock)) == 0 })
}

// TestGrantRequeue mixes Requeue, Lock and Unlock of contenders with and
// without grants on one lock: exclusion and token order hold, and
// Requeue's multi grants too.
func TestGrantRequeue(t *testing.T) {
	e := newEnv(t)
	const sessions, rounds = 6, 25
	lock := e.path + "/lock"
	g := &guard{t: t}
	ctx := ctxTimeout(t, 3*time.Minute)
	var wg sync.WaitGroup
	ss := make([]*zkrecipes.Session, sessions)
	for i := range ss {
		ss[i] = e.session()
		var opts []zkrecipes.LockOption
		if i%3 != 2 {
			opts = append(opts, zkrecipes.WithGrants())
		}
		m := zkrecipes.NewMutex(ss[i], lock, opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Errorf("session %d: Lock: %v", i, err)
				return
			}
			for r := range rounds {
				g.enter(fmt.Sprintf("session %d", i), m.Token())
				g.leave()
				var err error
				if i%2 == 0 || r%4 == 0 {
					err = m.Requeue(ctx)
				} else if err = m.Unlock(ctx); err == nil {
					err = m.Lock(ctx)
				}
				if err != nil {
					t.Errorf("session %d round %d: %v", i, r, err)
					return
				}
			}
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("session %d: Unlock: %v", i, err)
			}
		}()
	}
	wg.Wait()
	var grants, granted int64
	for _, s := range ss {
		grants += s.Stats().Grants
		granted += s.Stats().Granted
	}
	t.Logf("%d holdings: %d granted, %d held on a grant", g.entries, grants, granted)
	if grants == 0 || granted == 0 {
		t.Errorf("no handoff by grant in %d holdings (%d grants, %d taken)", g.entries, grants, granted)
	}
	e.empty(lock)
}

// TestGrantSemaphoreRefused: WithGrants given to a Semaphore is refused
// before any request.
func TestGrantSemaphoreRefused(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if _, err := zkrecipes.NewSemaphore(e.session(), e.path+"/sem", 2, zkrecipes.WithGrants()).Acquire(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Semaphore with WithGrants: Acquire = %v, want ErrInvalidArgument", err)
	}
	if _, ok, _ := e.admin.Exists(e.path + "/sem"); ok {
		t.Error("the refused Semaphore made its path")
	}
}

// TestGrantRWMutex: an RWMutex writer hands the write lock to the writer
// right after it, and the last writer of a run to the readers after it, all
// at once; the writer behind the readers waits for both.
func TestGrantRWMutex(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	ss := make([]*zkrecipes.Session, 6)
	ms := make([]*zkrecipes.RWMutex, 6)
	for i := range ms {
		ss[i] = e.session()
		ms[i] = zkrecipes.NewRWMutex(ss[i], lock, zkrecipes.WithGrants())
	}
	// 0 writes; 1 and 2 write, 3 and 4 read, 5 writes.
	must(t, ms[0].Lock(ctx), "0: Lock")
	var chs []<-chan error
	for i := 1; i < 6; i++ {
		f := ms[i].Lock
		if i == 3 || i == 4 {
			f = ms[i].RLock
		}
		chs = append(chs, e.queue(lock, i+1, func() error { return f(ctx) }))
	}
	e.waitFor("every waiter to watch", func() bool {
		kids := e.sortedChildren(lock)
		// 0: its own hold and 1; 1: 2; 2: readers 3 and 4; 4: writer 5.
		for i, want := range map[int]int{0: 2, 1: 1, 2: 2, 4: 1} {
			if watchersOf(t, e.servers[0], lock+"/"+kids[i]) < want {
				return false
			}
		}
		return true
	})
	must(t, ms[0].Unlock(ctx), "0: Unlock")
	must(t, result(t, chs[0], "1: Lock"), "1: Lock")
	e.checkRWToken(ms[1], lock, "1")
	must(t, ms[1].Unlock(ctx), "1: Unlock")
	must(t, result(t, chs[1], "2: Lock"), "2: Lock")
	must(t, ms[2].Unlock(ctx), "2: Unlock")
	must(t, result(t, chs[2], "3: RLock"), "3: RLock")
	must(t, result(t, chs[3], "4: RLock"), "4: RLock")
	blocked(t, chs[4], "5: Lock")
	must(t, ms[3].RUnlock(ctx), "3: RUnlock")
	must(t, ms[4].RUnlock(ctx), "4: RUnlock")
	must(t, result(t, chs[4], "5: Lock"), "5: Lock")
	must(t, ms[5].Unlock(ctx), "5: Unlock")
	for i, s := range ss {
		var want int64
		switch i {
		case 2, 3, 4:
			want = 1 // 1 listed 2, 3 and 4: it granted 2, naming the readers, and 2 granted them
		}
		if got := s.Stats().Granted; got != want {
			t.Errorf("%d: held on %d grants, want %d", i, got, want)
		}
	}
	if g1, g2 := ss[1].Stats().Grants, ss[2].Stats().Grants; g1 != 1 || g2 != 1 {
		t.Errorf("writers 1 and 2 granted in %d and %d releases, want 1 and 1", g1, g2)
	}
	if g := e.grantNodes(lock); len(g) != 0 {
		t.Errorf("grants left: %v", g)
	}
	e.empty(lock)
}

// TestGrantRWMutexReaders: a writer grants the readers right after it
// that take grants, passing over one that does not (it lists, and holds
// with them), and never a reader behind the next writer. A reader that
// left before the release is dropped from the grant, the others granted.
func TestGrantRWMutexReaders(t *testing.T) {
	t.Run("all", func(t *testing.T) { testGrantReaders(t, false) })
	t.Run("third leaves", func(t *testing.T) { testGrantReaders(t, true) })
}

func testGrantReaders(t *testing.T, leave bool) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	type who struct {
		read bool
		opts []zkrecipes.LockOption
	}
	// 0 writes (it holds); 1 reads, 2 reads without grants, 3 reads, 4
	// writes, 5 reads.
	line := []who{{false, nil}, {true, nil}, {true, []zkrecipes.LockOption{zkrecipes.WithoutGrants()}}, {true, nil}, {false, nil}, {true, nil}}
	ss := make([]*zkrecipes.Session, len(line))
	ms := make([]*zkrecipes.RWMutex, len(line))
	for i, w := range line {
		ss[i] = e.session()
		ms[i] = zkrecipes.NewRWMutex(ss[i], lock, append([]zkrecipes.LockOption{zkrecipes.WithGrants()}, w.opts...)...)
	}
	cctx, cancel := context.WithCancel(ctx) // reader 3's, with leave
	defer cancel()
	lockOf := func(i int) func() error {
		c := ctx
		if i == 3 && leave {
			c = cctx
		}
		if line[i].read {
			return func() error { return ms[i].RLock(c) }
		}
		return func() error { return ms[i].Lock(c) }
	}
	// 0 holds on a listing that shows the others: a first writer lets go
	// once they queued.
	first := zkrecipes.NewRWMutex(e.session(), lock)
	must(t, first.Lock(ctx), "first: Lock")
	chs := []<-chan error{e.queue(lock, 2, lockOf(0))}
	for i := 1; i < len(line); i++ {
		chs = append(chs, e.queue(lock, i+2, lockOf(i)))
	}
	e.waitFor("every waiter to watch", func() bool {
		kids := e.sortedChildren(lock)
		// In queue order, first, then 0 to 5: first is watched by its hold
		// and 0; 0 by readers 1, 2 and 3; 3 by writer 4; 4 by reader 5.
		for i, want := range map[int]int{0: 2, 1: 3, 4: 1, 5: 1} {
			if watchersOf(t, e.servers[0], lock+"/"+kids[i]) < want {
				return false
			}
		}
		return true
	})
	must(t, first.Unlock(ctx), "first: Unlock")
	must(t, result(t, chs[0], "0: Lock"), "0: Lock")
	for _, i := range []int{1, 2, 3, 4, 5} {
		blocked(t, chs[i], fmt.Sprint(i, ": its lock while 0 writes"))
	}
	readers := []int{1, 2, 3}
	if leave {
		cancel()
		if err := result(t, chs[3], "3: RLock cancelled"); err == nil {
			t.Fatal("3: RLock held after its cancel")
		}
		e.waitFor("3's node gone", func() bool { return len(e.children(lock)) == len(line)-1 })
		readers = []int{1, 2}
	}
	must(t, ms[0].Unlock(ctx), "0: Unlock")
	for _, i := range readers {
		must(t, result(t, chs[i], fmt.Sprint(i, ": RLock")), "%d: RLock", i)
	}
	blocked(t, chs[4], "4: Lock while readers hold")
	blocked(t, chs[5], "5: RLock behind writer 4")
	for _, i := range readers {
		want := int64(1)
		if i == 2 {
			want = 0
		}
		if got := ss[i].Stats().Granted; got != want {
			t.Errorf("reader %d held on %d grants, want %d", i, got, want)
		}
	}
	for _, i := range readers {
		must(t, ms[i].RUnlock(ctx), "%d: RUnlock", i)
	}
	must(t, result(t, chs[4], "4: Lock"), "4: Lock")
	blocked(t, chs[5], "5: RLock while 4 writes")
	must(t, ms[4].Unlock(ctx), "4: Unlock")
	must(t, result(t, chs[5], "5: RLock"), "5: RLock")
	if got := ss[5].Stats().Granted; got != 1 {
		t.Errorf("reader 5 held on %d grants, want 1 (4 listed it)", got)
	}
	must(t, ms[5].RUnlock(ctx), "5: RUnlock")
	if g := e.grantNodes(lock); len(g) != 0 {
		t.Errorf("grants left: %v", g)
	}
	e.empty(lock)
}

// checkRWToken is checkToken for an RWMutex writer.
func (e *env) checkRWToken(m *zkrecipes.RWMutex, lock, who string) {
	e.t.Helper()
	kids := e.sortedChildren(lock)
	st, ok, err := e.admin.Exists(lock + "/" + kids[0])
	if err != nil || !ok {
		e.t.Fatalf("%s: stat %s: %v", who, kids[0], err)
	}
	if m.Token() != st.Czxid {
		e.t.Errorf("%s: Token %#x, want its node's czxid %#x", who, m.Token(), st.Czxid)
	}
}

// TestGrantElection: a leader that resigns hands the leadership to the
// next candidate, which leads without a listing; Leader reports each in
// turn, and tokens increase.
func TestGrantElection(t *testing.T) {
	e := newEnv(t)
	const candidates = 6
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	first := zkrecipes.NewElection(e.session(), path, "first", zkrecipes.WithGrants())
	must(t, first.Campaign(ctx), "first: Campaign")
	var ss []*zkrecipes.Session
	var els []*zkrecipes.Election
	var chs []<-chan error
	for i := range candidates {
		s := e.session()
		el := zkrecipes.NewElection(s, path, fmt.Sprint("c", i), zkrecipes.WithGrants())
		ss, els = append(ss, s), append(els, el)
		chs = append(chs, e.queue(path, i+2, func() error { return el.Campaign(ctx) }))
	}
	e.waitQueued(path, candidates+1)
	last := first.Token()
	must(t, first.Resign(ctx), "first: Resign")
	for i, el := range els {
		must(t, result(t, chs[i], fmt.Sprint("c", i, ": Campaign")), "c%d: Campaign", i)
		if got, err := el.Leader(ctx); err != nil || got != fmt.Sprint("c", i) {
			t.Errorf("c%d leads, Leader = %q, %v", i, got, err)
		}
		if el.Token() <= last {
			t.Errorf("c%d: token %#x not above %#x", i, el.Token(), last)
		}
		last = el.Token()
		must(t, el.Resign(ctx), "c%d: Resign", i)
	}
	var granted int64
	for _, s := range ss {
		granted += s.Stats().Granted
	}
	// c0 lists (first knew nobody after it when it took the lead) and
	// grants to the other five.
	if granted != candidates-1 {
		t.Errorf("%d candidates led on a grant, want %d", granted, candidates-1)
	}
	e.empty(path)
	if left := e.grantNodes(path); len(left) > 0 {
		t.Errorf("grants left: %v", left)
	}
	if err := zkrecipes.NewElection(e.session(), path, "x", zkrecipes.WithNodeData([]byte("y"))).Campaign(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Election with WithNodeData: Campaign = %v, want ErrInvalidArgument", err)
	}
}

// TestGrantPassOverCostsNothing: a holder whose next contender takes no
// grants releases with a plain delete, not a multi that would fail on the
// grant: the run stops there by the contender's name alone. Counted on the
// embedded server, which counts requests by opcode.
func TestGrantPassOverCostsNothing(t *testing.T) {
	srv := zkserver.RunT(t)
	e := newEnvOn(t, []string{srv.Addr()})
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock, zkrecipes.WithGrants())
	plain := zkrecipes.NewMutex(e.session(), lock) // a version-4 UUID, as Curator's and kazoo's
	next := e.lineUp(ctx, e.session(), lock, holder, func() error { return plain.Lock(ctx) })[0]
	before := srv.Stats().Requests
	must(t, holder.Unlock(ctx), "holder: Unlock")
	after := srv.Stats().Requests
	for _, op := range []struct {
		name   string
		opcode int32
		want   int64
	}{{"multi", 14, 0}, {"delete", 2, 1}} {
		if got := after[op.opcode] - before[op.opcode]; got != op.want {
			t.Errorf("the release sent %d %s requests, want %d", got, op.name, op.want)
		}
	}
	must(t, result(t, next, "plain: Lock"), "plain: Lock")
	must(t, plain.Unlock(ctx), "plain: Unlock")
	e.empty(lock)
}

// TestGrantRequeueGrants: a holder that knows its heir and requeues grants
// to it in the Requeue's one multi.
func TestGrantRequeueGrants(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	hs, heirS := e.session(), e.session()
	holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
	heir := zkrecipes.NewMutex(heirS, lock, zkrecipes.WithGrants())
	heirDone := e.lineUp(ctx, e.session(), lock, holder, func() error { return heir.Lock(ctx) })[0]
	requeued := async(func() error { return holder.Requeue(ctx) })
	must(t, result(t, heirDone, "heir: Lock"), "heir: Lock")
	if got := heirS.Stats().Granted; got != 1 {
		t.Errorf("heir: held on %d grants after the holder's Requeue, want 1", got)
	}
	blocked(t, requeued, "holder: Requeue")
	must(t, heir.Unlock(ctx), "heir: Unlock")
	must(t, result(t, requeued, "holder: Requeue"), "holder: Requeue")
	if got := hs.Stats().Grants; got != 1 { // counted once the multi's answer came
		t.Errorf("holder: granted %d times in its Requeue, want 1", got)
	}
	must(t, holder.Unlock(ctx), "holder: Unlock")
	e.empty(lock)
}

// TestGrantOwnKindOnly: a Mutex holder does not grant an RWMutex writer
// queued right after it on the same path, though both take grants: only
// the holder's own kind is granted, and the writer lists.
func TestGrantOwnKindOnly(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	hs, ws := e.session(), e.session()
	holder := zkrecipes.NewMutex(hs, lock, zkrecipes.WithGrants())
	writer := zkrecipes.NewRWMutex(ws, lock, zkrecipes.WithGrants())
	done := e.lineUp(ctx, e.session(), lock, holder, func() error { return writer.Lock(ctx) })[0]
	must(t, holder.Unlock(ctx), "holder: Unlock")
	must(t, result(t, done, "writer: Lock"), "writer: Lock")
	if g, h := hs.Stats().Grants, ws.Stats().Granted; g != 0 || h != 0 {
		t.Errorf("the Mutex granted %d times, the writer held on %d grants; want 0 and 0", g, h)
	}
	must(t, writer.Unlock(ctx), "writer: Unlock")
	e.empty(lock)
}

// onBoth runs test on real ZooKeeper (srv nil) and on zkserver, whose
// container check a test can run.
func onBoth(t *testing.T, test func(t *testing.T, e *env, srv *zkserver.Server)) {
	t.Run("zookeeper", func(t *testing.T) { test(t, newEnv(t), nil) })
	t.Run("zkserver", func(t *testing.T) {
		srv := zkserver.RunT(t)
		test(t, newEnvOn(t, []string{srv.Addr()}), srv)
	})
}

// TestGrantDirectoryGoes: a session's grants directory on a lock (a
// container) holds an ephemeral node of the session's while the session
// lives, so that once the session has ended the directory is empty after
// having had a child, which is what ZooKeeper's container check removes;
// a session that was never granted the lock included. Without that node,
// such a directory would stay on the server for ever. A directory someone
// else removed is made again, with its node, by the next Lock. On the
// embedded server, whose container check the test can run, the
// directories are then removed.
func TestGrantDirectoryGoes(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env, srv *zkserver.Server) {
		ctx := ctxTimeout(t, time.Minute)
		lock := e.path + "/lock"
		s := e.session()
		m := zkrecipes.NewMutex(s, lock, zkrecipes.WithGrants())
		must(t, m.Lock(ctx), "Lock")
		must(t, m.Unlock(ctx), "Unlock")
		keys := e.children(lock + ".grants")
		if len(keys) != 1 {
			t.Fatalf("grants directories under %s.grants: %v, want one", lock, keys)
		}
		dir := lock + ".grants/" + keys[0]
		owned := func() {
			t.Helper()
			_, st, err := e.admin.Get(dir + "/owner")
			if err != nil || st.EphemeralOwner != s.ID() {
				t.Fatalf("%s/owner: owner 0x%x, %v; want an ephemeral node of the session (0x%x)", dir, st.EphemeralOwner, err, s.ID())
			}
		}
		owned()
		// Removed by someone else, the directory is made again, with
		// its owner node, by the next Lock: once the session has seen
		// the two deletions.
		events := s.Stats().GrantEvents
		must(t, e.admin.Delete(dir+"/owner", -1), "delete owner")
		must(t, e.admin.Delete(dir, -1), "delete %s", dir)
		e.waitFor("the two deletions seen", func() bool { return s.Stats().GrantEvents >= events+2 })
		must(t, m.Lock(ctx), "Lock again")
		must(t, m.Unlock(ctx), "Unlock again")
		owned()
		// The server's container check removes only containers that
		// had a child; this one has one.
		if _, st, err := e.admin.Get(dir); err != nil || st.Cversion == 0 {
			t.Fatalf("%s: cversion %d, %v; want a container that had a child", dir, st.Cversion, err)
		}
		s.Close()
		// Emptied by the session's end (or already removed by the
		// server's container check).
		e.waitFor(dir+" emptied by the session's end", func() bool { return len(e.children(dir)) == 0 })
		if srv != nil {
			srv.CheckContainers() // the grants directory of the session
			srv.CheckContainers() // then the lock's, and the lock's node
			for _, p := range []string{dir, lock + ".grants", lock} {
				if _, ok, err := e.admin.Exists(p); ok || err != nil {
					t.Errorf("%s still there after the container checks (%v)", p, err)
				}
			}
		}
	})
}

// TestGrantByDefault: without an option, a session's contenders take
// grants on a path once the session has waited there, and never before: an
// uncontended session makes no grants directory. A holder that takes no
// grants (it queued before its session had a route) still grants on.
func TestGrantByDefault(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	a, b, c := e.session(), e.session(), e.session()
	ma, mb, mc := zkrecipes.NewMutex(a, lock), zkrecipes.NewMutex(b, lock), zkrecipes.NewMutex(c, lock)

	// Uncontended: nothing beside the lock.
	must(t, ma.Lock(ctx), "a: Lock")
	must(t, ma.Unlock(ctx), "a: Unlock")
	if _, ok, err := e.admin.Exists(lock + ".grants"); ok || err != nil {
		t.Fatalf("%s.grants after an uncontended Lock: exists %v (%v), want none", lock, ok, err)
	}

	// b and c wait behind a: their sessions set up routes, a's does not.
	must(t, ma.Lock(ctx), "a: Lock")
	bl := e.queue(lock, 2, func() error { return mb.Lock(ctx) })
	cl := e.queue(lock, 3, func() error { return mc.Lock(ctx) })
	for _, s := range []*zkrecipes.Session{b, c} {
		e.waitFor("a route set up for a waiter's session", func() bool {
			live, busy := zkrecipes.GrantRoutes(s)
			return live == 1 && busy == 0
		})
	}
	if live, busy := zkrecipes.GrantRoutes(a); live+busy != 0 {
		t.Fatalf("the holder's session has %d routes (%d busy), want none", live, busy)
	}
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, bl, "b: Lock"), "b: Lock")
	must(t, mb.Unlock(ctx), "b: Unlock")
	must(t, result(t, cl, "c: Lock"), "c: Lock")
	if n := len(e.children(lock + ".grants")); n != 2 {
		t.Fatalf("%d grants directories, want 2 (b's and c's)", n)
	}
	if g := b.Stats().Granted + c.Stats().Granted; g != 0 {
		t.Fatalf("%d acquisitions on a grant before any route was up when queueing, want 0", g)
	}

	// c holds; a queues (it waits, so its route comes, but its node takes
	// no grants), then b (which now does). c lets go: a lists, sees b
	// after it, and grants to b.
	al := e.queue(lock, 2, func() error { return ma.Lock(ctx) })
	bl = e.queue(lock, 3, func() error { return mb.Lock(ctx) })
	e.waitQueued(lock, 3)
	must(t, mc.Unlock(ctx), "c: Unlock")
	must(t, result(t, al, "a: Lock"), "a: Lock")
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, bl, "b: Lock"), "b: Lock")
	e.checkToken(mb, lock, "b")
	if g, gr := a.Stats().Grants, b.Stats().Granted; g != 1 || gr != 1 {
		t.Fatalf("a granted %d times and b held on %d grants, want 1 and 1", g, gr)
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	if g := e.grantNodes(lock); len(g) != 0 {
		t.Fatalf("grants left: %v", g)
	}
}

// TestGrantRouteRetires: a route no contender uses goes after the linger:
// its watch is removed and the session's owner node deleted, so the server
// can remove the directory while the session lives; a later Lock sets the
// route up again, and grants work through it.
func TestGrantRouteRetires(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env, srv *zkserver.Server) {
		ctx := ctxTimeout(t, time.Minute)
		lock := e.path + "/lock"
		a, b := e.session(), e.session(zkrecipes.WithGrantLinger(50*time.Millisecond))
		ma, mb := zkrecipes.NewMutex(a, lock, zkrecipes.WithGrants()), zkrecipes.NewMutex(b, lock, zkrecipes.WithGrants())
		must(t, mb.Lock(ctx), "b: Lock")
		must(t, mb.Unlock(ctx), "b: Unlock")
		keys := e.children(lock + ".grants") // before the server can remove it
		if len(keys) != 1 {
			t.Fatalf("grants directories: %v, want b's", keys)
		}
		dir := lock + ".grants/" + keys[0]
		e.waitFor("b's route taken down", func() bool {
			live, busy := zkrecipes.GrantRoutes(b)
			return live+busy == 0
		})
		if kids := e.children(dir); len(kids) != 0 {
			t.Fatalf("%s after the route went: %v, want empty", dir, kids)
		}
		// The watch went too: a change there tells b nothing. (The real
		// server's container check may have removed the directory: then
		// it is made again, as a plain node.)
		events := b.Client().Notifications()
		if _, err := e.admin.Create(dir, nil, zkclient.Persistent, openACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			t.Fatalf("create %s: %v", dir, err)
		}
		if _, err := e.admin.Create(dir+"/x", nil, zkclient.Persistent, openACL); err != nil {
			t.Fatalf("create %s/x: %v", dir, err)
		}
		must(t, e.admin.Delete(dir+"/x", -1), "delete %s/x", dir)
		must(t, zkrecipes.RoundTrip(ctx, b), "round trip")
		if n := b.Client().Notifications() - events; n != 0 {
			t.Fatalf("b got %d events from %s after its route went, want 0", n, dir)
		}
		if srv != nil {
			srv.CheckContainers()
			if _, ok, err := e.admin.Exists(dir); ok || err != nil {
				t.Fatalf("%s still there after the container check, b's session alive (%v)", dir, err)
			}
		}

		// Set up again by b's next Lock, and granted through: c
		// holds, a and b queue behind it; c lets go, a lists, sees b
		// after it, and grants to b.
		c := e.session()
		mc := zkrecipes.NewMutex(c, lock)
		must(t, mc.Lock(ctx), "c: Lock")
		al := e.queue(lock, 2, func() error { return ma.Lock(ctx) })
		bl := e.queue(lock, 3, func() error { return mb.Lock(ctx) })
		e.waitQueued(lock, 3)
		must(t, mc.Unlock(ctx), "c: Unlock")
		must(t, result(t, al, "a: Lock"), "a: Lock")
		must(t, ma.Unlock(ctx), "a: Unlock")
		must(t, result(t, bl, "b: Lock"), "b: Lock")
		if g := b.Stats().Granted; g != 1 {
			t.Fatalf("b held on %d grants through its new route, want 1", g)
		}
		if _, st, err := e.admin.Get(dir + "/owner"); err != nil || st.EphemeralOwner != b.ID() {
			t.Fatalf("%s/owner: owner 0x%x, %v; want b's (0x%x)", dir, st.EphemeralOwner, err, b.ID())
		}
		must(t, mb.Unlock(ctx), "b: Unlock")
	})
}

// TestGrantRoutePinned: the route a waiting contender set up stays while
// that contender waits and holds, however long, and goes once it lets go.
func TestGrantRoutePinned(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	const linger = 20 * time.Millisecond
	a, b := e.session(), e.session(zkrecipes.WithGrantLinger(linger))
	ma, mb := zkrecipes.NewMutex(a, lock), zkrecipes.NewMutex(b, lock)
	up := func() bool {
		live, busy := zkrecipes.GrantRoutes(b)
		return live == 1 && busy == 0
	}
	stillUp := func(what string) {
		t.Helper()
		time.Sleep(20 * linger) // nothing to wait for: the route must not go
		if !up() {
			t.Fatalf("b's route went while %s", what)
		}
	}
	must(t, ma.Lock(ctx), "a: Lock")
	bl := e.queue(lock, 2, func() error { return mb.Lock(ctx) })
	e.waitFor("b's route up", up)
	stillUp("b waits")
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, bl, "b: Lock"), "b: Lock")
	stillUp("b holds")
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.waitFor("b's route taken down", func() bool {
		live, busy := zkrecipes.GrantRoutes(b)
		return live+busy == 0
	})
}
