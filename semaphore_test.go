package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// permitTracker counts the participants that believe they hold a lease,
// each by its own view: from Acquire's return until it releases or its
// Lost closes. As in TestElectionChurn, a participant stops counting when
// the test decides to expire its session, just before the server ends it
// (and deletes its lease node in the same step): the old client can only
// learn of the expiry afterwards.
type permitTracker struct {
	t        *testing.T
	n        int
	mu       sync.Mutex
	holders  map[*zkrecipes.Session]bool
	expiring map[*zkrecipes.Session]bool
	max      int
	total    int
}

func (p *permitTracker) enter(s *zkrecipes.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expiring[s] {
		return
	}
	p.holders[s] = true
	if len(p.holders) > p.n {
		p.t.Errorf("%d participants hold a lease of a semaphore with %d permits", len(p.holders), p.n)
	}
	p.max = max(p.max, len(p.holders))
	p.total++
}

func (p *permitTracker) leave(s *zkrecipes.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holders, s)
}

func (p *permitTracker) markExpiring(s *zkrecipes.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expiring[s] = true
	delete(p.holders, s)
}

// TestSemaphoreLimit: 20 sessions contend for 3 permits, holding for random
// times, while the test expires random sessions (holders and acquirers in
// the middle of Acquire): never more than 3 hold at once.
func TestSemaphoreLimit(t *testing.T) {
	e := newEnv(t)
	const sessions, permits, acquisitions, expiries = 20, 3, 200, 30
	path := e.path + "/sem"
	ctx := ctxTimeout(t, 2*time.Minute)
	pctx, stop := context.WithCancel(ctx)
	tr := &permitTracker{t: t, n: permits, holders: map[*zkrecipes.Session]bool{}, expiring: map[*zkrecipes.Session]bool{}}
	current := make([]*zkrecipes.Session, sessions)

	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				s, err := zkrecipes.NewSession(ctx, e.servers)
				if !check(t, err, "participant %d: NewSession", i) {
					return
				}
				tr.mu.Lock()
				current[i] = s
				tr.mu.Unlock()
				sem := zkrecipes.NewSemaphore(s, path, permits)
				for s.Err() == nil && pctx.Err() == nil {
					l, err := sem.Acquire(pctx)
					if err != nil {
						if pctx.Err() == nil && s.Err() == nil {
							t.Errorf("participant %d: Acquire: %v", i, err)
						}
						break
					}
					tr.enter(s)
					select {
					case <-time.After(time.Duration(rand.IntN(10_000)) * time.Microsecond):
					case <-l.Lost():
					}
					tr.leave(s)
					if err := l.Release(ctx); err != nil && s.Err() == nil {
						t.Errorf("participant %d: Release: %v", i, err)
					}
				}
				s.Close()
			}
		}()
	}

	for k := 0; k < expiries; k++ {
		time.Sleep(time.Duration(20+rand.IntN(40)) * time.Millisecond)
		tr.mu.Lock()
		s := current[rand.IntN(sessions)]
		gone := s == nil || tr.expiring[s]
		tr.mu.Unlock()
		if !gone {
			tr.markExpiring(s)
			expireSession(t, e.servers[0], s)
		}
	}
	e.waitFor("enough acquisitions", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.total >= acquisitions
	})
	stop()
	wg.Wait()
	t.Logf("%d acquisitions, up to %d at once, %d sessions expired", tr.total, tr.max, len(tr.expiring))
	e.empty(path + "/leases")
	e.empty(path + "/locks")
}

var leaseName = regexp.MustCompile(`^_c_[0-9a-f-]{36}-lease-\d{10}$`)

// TestSemaphorePermits: exactly n leases are granted at once, the next
// acquirer waits for a release, disagreeing n is refused, cancelled and
// expired acquirers leave nothing, and an expired holder's Lost closes.
func TestSemaphorePermits(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/sem"
	ctx := ctxTimeout(t, time.Minute)
	leases := path + "/leases"

	ss := make([]*zkrecipes.Session, 3)
	ls := make([]*zkrecipes.Lease, 3)
	for i := range ls {
		ss[i] = e.session()
		l, err := zkrecipes.NewSemaphore(ss[i], path, 3).Acquire(ctx)
		must(t, err, "lease %d of 3", i)
		ls[i] = l
	}
	for _, k := range e.children(leases) {
		if !leaseName.MatchString(k) {
			t.Errorf("lease node %q is not named like Curator's", k)
		}
	}
	if data, _, err := e.admin.Get(path); err != nil || string(data) != "3" {
		t.Errorf("permit record at %s = %q, %v; want \"3\"", path, data, err)
	}

	// A fourth waits (its lease node is there, but it does not hold).
	s4 := e.session()
	var l4 *zkrecipes.Lease
	done4 := async(func() (err error) {
		l4, err = zkrecipes.NewSemaphore(s4, path, 3).Acquire(ctx)
		return err
	})
	e.waitFor("the fourth to add its lease node", func() bool { return len(e.children(leases)) == 4 })
	blocked(t, done4, "fourth Acquire")

	// Disagreeing n is refused, leaving nothing.
	other := e.session()
	if _, err := zkrecipes.NewSemaphore(other, path, 4).Acquire(ctx); !errors.Is(err, zkrecipes.ErrPermitsMismatch) {
		t.Errorf("Acquire with 4 permits on a 3-permit semaphore = %v, want ErrPermitsMismatch", err)
	}
	// Cancelled while queued for the semaphore's mutex: nothing left.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := zkrecipes.NewSemaphore(other, path, 3).Acquire(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fifth Acquire = %v, want DeadlineExceeded", err)
	}
	cancel()
	if n := len(e.children(leases)); n != 4 {
		t.Errorf("%d lease nodes after refused and cancelled acquirers, want 4", n)
	}
	if n := len(e.children(path + "/locks")); n != 1 {
		t.Errorf("%d mutex nodes, want only the waiting fourth's", n)
	}
	blocked(t, done4, "fourth Acquire")

	// A holder's session expires: its Lost closes and the fourth gets in.
	e.expire(ss[0])
	must(t, result(t, done4, "fourth Acquire"), "fourth Acquire after a holder expired")
	closed(t, ls[0].Lost(), "expired holder's Lost")
	if err := ls[0].Release(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Release after expiry = %v, want ErrSessionExpired", err)
	}
	must(t, ls[1].Release(ctx), "Release")
	closed(t, ls[1].Lost(), "Lost after Release")
	if err := ls[1].Release(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	must(t, ls[2].Release(ctx), "Release")
	must(t, l4.Release(ctx), "Release")

	if _, err := zkrecipes.NewSemaphore(other, path, 0).Acquire(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Acquire with 0 permits = %v, want ErrInvalidArgument", err)
	}
	e.empty(leases)
	e.empty(path + "/locks")
}

// TestSemaphoreInterop runs Curator's InterProcessSemaphoreV2 and zkrecipes'
// Semaphore with the same number of permits on one path at the same time.
// Every holder marks a shared directory; more holders than permits is a
// violation. (kazoo's Semaphore lays its nodes out differently and does not
// take part.)
func TestSemaphoreInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	const permits, rounds = 2, 10
	path := e.path + "/semaphore"
	marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
	var cmds []*exec.Cmd
	for i := range 3 {
		cmds = append(cmds, curator(ctx, argv(t, interop.Args{
			Connect: strings.Join(e.servers, ","), Path: path, Recipe: "semaphore", Leases: permits,
			Count: rounds, Hold: 20 * time.Millisecond, Marker: marker, ID: fmt.Sprintf("curator-%d", i),
			StartFile: start,
		})...))
	}
	procs := startReady(t, cmds...)
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		most int // the most holders any zkrecipes holder saw marked
	)
	for i := range 3 {
		sem := zkrecipes.NewSemaphore(e.session(), path, permits)
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("zkrecipes-%d", i)
			for n := 1; n <= rounds; n++ {
				l, err := sem.Acquire(ctx)
				if !check(t, err, "%s: Acquire", id) {
					return
				}
				mine, holders, err := markLease(marker, permits, id, n)
				if err != nil {
					t.Errorf("%s round %d: %v", id, n, err)
				}
				mu.Lock()
				most = max(most, holders)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				os.Remove(mine)
				check(t, l.Release(ctx), "%s: Release", id)
			}
		}()
	}
	wg.Wait()
	for _, p := range procs {
		p.wait(t)
	}
	// Six contenders for two permits: the permits were shared, not taken
	// one at a time.
	if most < permits {
		t.Errorf("at most %d holders seen at once, want %d: the test did not exercise the limit", most, permits)
	}
	e.empty(path + "/leases")
	e.empty(path + "/locks")
}

// TestSemaphoreTryAcquire: TryAcquire takes a free permit at once, and
// when every permit is taken, or another acquirer waits holding the
// semaphore's mutex, it fails with ErrLocked at once, without a write and
// leaving nothing. Lease nodes carry the semaphore's node data.
func TestSemaphoreTryAcquire(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/sem"
	leases := path + "/leases"
	ctx := ctxTimeout(t, time.Minute)
	sa, sb, sc := e.session(), e.session(), e.session()
	a, err := zkrecipes.NewSemaphore(sa, path, 2, zkrecipes.WithNodeData([]byte("a"))).TryAcquire(ctx)
	must(t, err, "a: TryAcquire of a free semaphore")
	b, err := zkrecipes.NewSemaphore(sb, path, 2, zkrecipes.WithNodeData([]byte("b"))).TryAcquire(ctx)
	must(t, err, "b: TryAcquire of the second permit")
	var data []string
	for _, k := range e.children(leases) {
		d, _, err := e.admin.Get(leases + "/" + k)
		must(t, err, "get %s", k)
		data = append(data, string(d))
	}
	if slices.Sort(data); !slices.Equal(data, []string{"a", "b"}) {
		t.Errorf("lease nodes' data %q, want a and b", data)
	}

	// Both permits taken: c fails at once, with no write.
	semC := zkrecipes.NewSemaphore(sc, path, 2)
	before := sc.Stats()
	if _, err := semC.TryAcquire(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Fatalf("TryAcquire with both permits taken = %v, want ErrLocked", err)
	}
	if after := sc.Stats(); after.Creates != before.Creates || after.Deletes != before.Deletes {
		t.Errorf("a refused TryAcquire wrote: %d creates, %d deletes", after.Creates-before.Creates, after.Deletes-before.Deletes)
	}
	if n := len(e.children(leases)); n != 2 {
		t.Errorf("%d lease nodes after a refused TryAcquire, want 2", n)
	}

	// A waiting acquirer holds the mutex until a permit frees: c does not
	// queue behind it.
	sd := e.session()
	var d *zkrecipes.Lease
	doneD := async(func() (err error) {
		d, err = zkrecipes.NewSemaphore(sd, path, 2).Acquire(ctx)
		return err
	})
	e.waitFor("d to wait with its lease node", func() bool { return len(e.children(leases)) == 3 })
	if _, err := semC.TryAcquire(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("TryAcquire behind a waiting acquirer = %v, want ErrLocked", err)
	}
	if n, m := len(e.children(leases)), len(e.children(path+"/locks")); n != 3 || m != 1 {
		t.Errorf("%d lease and %d mutex nodes after a refused TryAcquire, want d's only (3 and 1)", n, m)
	}
	must(t, a.Release(ctx), "a: Release")
	must(t, result(t, doneD, "d's Acquire"), "d: Acquire")
	must(t, b.Release(ctx), "b: Release")
	c, err := semC.TryAcquire(ctx)
	must(t, err, "c: TryAcquire after b released")
	must(t, c.Release(ctx), "c: Release")
	must(t, d.Release(ctx), "d: Release")

	// A cancelled TryAcquire leaves nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := semC.TryAcquire(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire with a cancelled context = %v, want Canceled", err)
	}
	e.empty(leases)
	e.empty(path + "/locks")
}

// TestSemaphoreTryAcquireContention: 8 sessions call TryAcquire in a loop
// on 3 permits: never more than 3 hold, some calls succeed and some are
// refused, and nothing is left.
func TestSemaphoreTryAcquireContention(t *testing.T) {
	e := newEnv(t)
	const sessions, permits, rounds = 8, 3, 20
	path := e.path + "/sem"
	ctx := ctxTimeout(t, time.Minute)
	tr := &permitTracker{t: t, n: permits, holders: map[*zkrecipes.Session]bool{}, expiring: map[*zkrecipes.Session]bool{}}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
	)
	for i := range sessions {
		s := e.session()
		sem := zkrecipes.NewSemaphore(s, path, permits)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := sem.TryAcquire(ctx)
				if errors.Is(err, zkrecipes.ErrLocked) {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				if !check(t, err, "participant %d: TryAcquire", i) {
					return
				}
				tr.enter(s)
				time.Sleep(10 * time.Millisecond)
				tr.leave(s)
				check(t, l.Release(ctx), "participant %d: Release", i)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d granted (up to %d at once), %d refused", tr.total, tr.max, refused)
	if tr.total == 0 || refused == 0 {
		t.Errorf("%d granted, %d refused: the test did not contend", tr.total, refused)
	}
	e.empty(path + "/leases")
	e.empty(path + "/locks")
}

// TestSemaphoreLeaseNodeDeleted: a lease whose node another client deletes
// is lost (its Lost closes), and the permit is free again.
func TestSemaphoreLeaseNodeDeleted(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/sem"
	leases := path + "/leases"
	ctx := ctxTimeout(t, time.Minute)
	sem := zkrecipes.NewSemaphore(e.session(), path, 1, zkrecipes.WithNodeData([]byte("victim")))
	l, err := sem.Acquire(ctx)
	must(t, err, "Acquire")
	other := zkrecipes.NewSemaphore(e.session(), path, 1)
	if _, err := other.TryAcquire(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Fatalf("TryAcquire of a taken permit = %v, want ErrLocked", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while the lease is held")
	default:
	}
	kids := e.children(leases)
	if len(kids) != 1 {
		t.Fatalf("lease nodes %v, want one", kids)
	}
	if d, _, err := e.admin.Get(leases + "/" + kids[0]); err != nil || string(d) != "victim" {
		t.Fatalf("lease node data %q, %v; want victim", d, err)
	}
	must(t, e.admin.Delete(leases+"/"+kids[0], -1), "delete the lease node")
	closed(t, l.Lost(), "Lost of a lease whose node was deleted")
	l2, err := other.TryAcquire(ctx)
	must(t, err, "TryAcquire after the lease node was deleted")
	must(t, l.Release(ctx), "Release of a lease whose node was deleted")
	must(t, l2.Release(ctx), "Release")
	e.empty(leases)
}

// TestSemaphoreTryAcquireRace: the permits are taken between TryAcquire's
// read-only look and its writes. It still gives up at once with ErrLocked,
// leaving nothing: when its own lease node turns out to be one too many,
// and when another acquirer now waits holding the semaphore's mutex.
func TestSemaphoreTryAcquireRace(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	for _, waiter := range []bool{false, true} {
		path := fmt.Sprintf("%s/sem-%v", e.path, waiter)
		leases := path + "/leases"
		x := zkrecipes.NewSemaphore(e.session(), path, 1)
		var (
			lx, ly *zkrecipes.Lease
			doneY  <-chan error
		)
		try := zkrecipes.NewSemaphore(e.session(), path, 1)
		zkrecipes.SetAfterCheck(try, func() {
			var err error
			lx, err = x.Acquire(ctx)
			must(t, err, "x: Acquire in the gap")
			if waiter {
				y := zkrecipes.NewSemaphore(e.session(), path, 1)
				doneY = async(func() (err error) {
					ly, err = y.Acquire(ctx)
					return err
				})
				e.waitFor("y to wait holding the mutex", func() bool { return len(e.children(leases)) == 2 })
			}
		})
		// Bounded: a TryAcquire that waited instead would end with the
		// deadline, not ErrLocked.
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := try.TryAcquire(tctx)
		cancel()
		if !errors.Is(err, zkrecipes.ErrLocked) {
			t.Errorf("waiter=%v: TryAcquire whose permit was taken in the gap = %v, want ErrLocked", waiter, err)
		}
		want := 1
		if waiter {
			want = 2
		}
		if n := len(e.children(leases)); n != want {
			t.Errorf("waiter=%v: %d lease nodes after the refused TryAcquire, want %d", waiter, n, want)
		}
		must(t, lx.Release(ctx), "x: Release")
		if waiter {
			must(t, result(t, doneY, "y's Acquire"), "y: Acquire")
			must(t, ly.Release(ctx), "y: Release")
		}
		e.empty(leases)
		e.empty(path + "/locks")
	}
}
