package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Requeue hands the lock to the next in line and queues at the back, in one
// write.
func TestMutexRequeue(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	sa := e.session()
	// Without grants: a's requeued node waits, and the grant route its
	// session would set up then (two creates: TestGrantByDefault) is not
	// what this test counts.
	a, b := zkrecipes.NewMutex(sa, lock, zkrecipes.WithoutGrants()), zkrecipes.NewMutex(e.session(), lock)
	if err := a.Requeue(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Requeue without holding = %v, want ErrNotHeld", err)
	}
	must(t, a.Lock(ctx), "a: Lock")
	first, lost := a.Token(), a.Lost()
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	e.waitFor("b to queue", func() bool { return len(e.children(lock)) == 2 })

	before := sa.Stats()
	requeued := make(chan error, 1)
	go func() { requeued <- a.Requeue(ctx) }()
	must(t, <-got, "b: Lock after a requeued")
	select {
	case <-lost:
	default:
		t.Error("a's old holding not reported over")
	}
	select {
	case err := <-requeued:
		t.Fatalf("a's Requeue returned while b holds (err=%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	if kids := e.children(lock); len(kids) != 2 {
		t.Errorf("queue %v, want b's node and a's new one", kids)
	}
	must(t, b.Unlock(ctx), "b: Unlock")
	must(t, <-requeued, "a: Requeue")
	if a.Token() <= first {
		t.Errorf("token after Requeue %d, not above the first %d", a.Token(), first)
	}
	after := sa.Stats()
	if c, d := after.Creates-before.Creates, after.Deletes-before.Deletes; c != 1 || d != 1 {
		t.Errorf("Requeue sent %d creates and %d deletes, want one multi (1 and 1)", c, d)
	}
	must(t, a.Unlock(ctx), "a: Unlock")
	e.empty(lock)
}

// Workers that take turns with Requeue stay mutually exclusive.
func TestMutexRequeueExclusion(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	lock := e.path + "/lock"
	g := &guard{t: t}
	var wg sync.WaitGroup
	for i := range 5 {
		m := zkrecipes.NewMutex(e.session(), lock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			must(t, m.Lock(ctx), "worker %d: Lock", i)
			for r := range 20 {
				g.enter(fmt.Sprintf("worker %d", i), m.Token())
				g.leave()
				if err := m.Requeue(ctx); err != nil {
					t.Errorf("worker %d round %d: Requeue: %v", i, r, err)
					return
				}
			}
			must(t, m.Unlock(ctx), "worker %d: Unlock", i)
		}()
	}
	wg.Wait()
	e.empty(lock)
}

// Requeue sends one multi and no separate delete or create. Counted on the
// embedded server, which counts requests by opcode (real ZooKeeper's stats
// cannot tell which session sent what).
func TestMutexRequeueIsOneWrite(t *testing.T) {
	srv := zkserver.RunT(t)
	e := newEnvOn(t, []string{srv.Addr()})
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	m := zkrecipes.NewMutex(e.session(), lock)
	must(t, m.Lock(ctx), "Lock")
	before := srv.Stats().Requests
	must(t, m.Requeue(ctx), "Requeue")
	after := srv.Stats().Requests
	for _, op := range []struct {
		name   string
		opcode int32
		want   int64
	}{{"multi", 14, 1}, {"create", 1, 0}, {"delete", 2, 0}} {
		if got := after[op.opcode] - before[op.opcode]; got != op.want {
			t.Errorf("Requeue sent %d %s requests, want %d", got, op.name, op.want)
		}
	}
	must(t, m.Unlock(ctx), "Unlock")
	e.empty(lock)
}

// TestMutexRequeueCancelled: a Requeue whose context has ended leaves the
// line (its error says why), whether or not its multi was applied, and
// the lock passes on: neither its old node nor its new one is left
// holding. Both with and without grants.
func TestMutexRequeueCancelled(t *testing.T) {
	for _, grants := range []bool{false, true} {
		t.Run(fmt.Sprintf("grants=%v", grants), func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxTimeout(t, time.Minute)
			lock := e.path + "/lock"
			var opts []zkrecipes.LockOption
			if grants {
				opts = append(opts, zkrecipes.WithGrants())
			}
			a := zkrecipes.NewMutex(e.session(), lock, opts...)
			b := zkrecipes.NewMutex(e.session(), lock, opts...)
			must(t, a.Lock(ctx), "a: Lock")
			got := async(func() error { return b.Lock(ctx) })
			e.waitFor("b to queue", func() bool { return len(e.children(lock)) == 2 })
			done, cancel := context.WithCancel(ctx)
			cancel()
			if err := a.Requeue(done); !errors.Is(err, context.Canceled) {
				t.Errorf("Requeue with an ended context = %v, want context.Canceled", err)
			}
			must(t, result(t, got, "b: Lock"), "b: Lock after a's cancelled Requeue")
			must(t, b.Unlock(ctx), "b: Unlock")
			e.empty(lock)
			if err := a.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
				t.Errorf("a: Unlock after a failed Requeue = %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestMutexRequeueAnswerLost: a Requeue whose multi's answer is lost with
// the connection, and whose context ends before the session is connected
// again, leaves the line all the same: the new node if the multi was
// applied, the old one if it was not (in the background, once the session
// is connected again). The contender queued behind it holds, and nothing
// of the Requeue's is left.
func TestMutexRequeueAnswerLost(t *testing.T) {
	for _, applied := range []bool{true, false} {
		for _, grants := range []bool{false, true} {
			t.Run(fmt.Sprintf("applied=%v/grants=%v", applied, grants), func(t *testing.T) {
				e := newEnv(t)
				p := e.proxy()
				ctx := ctxTimeout(t, time.Minute)
				lock := e.path + "/lock"
				var opts []zkrecipes.LockOption
				if grants {
					opts = append(opts, zkrecipes.WithGrants())
				}
				a := zkrecipes.NewMutex(e.sessionOn([]string{p.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(20*time.Second)))), lock, opts...)
				b := zkrecipes.NewMutex(e.session(), lock, opts...)
				must(t, a.Lock(ctx), "a: Lock")
				got := async(func() error { return b.Lock(ctx) })
				e.waitFor("b to queue", func() bool { return len(e.children(lock)) == 2 })
				p.Refuse(true)
				p.CutOnRequest(14, applied) // the multi
				rctx, cancel := context.WithCancel(ctx)
				done := async(func() error { return a.Requeue(rctx) })
				closed(t, p.Tripped(), "the cut on Requeue's multi")
				cancel()
				if err := result(t, done, "a: Requeue"); !errors.Is(err, context.Canceled) {
					t.Errorf("Requeue = %v, want context.Canceled", err)
				}
				p.Refuse(false)
				must(t, result(t, got, "b: Lock"), "b: Lock")
				if kids := e.children(lock); len(kids) != 1 {
					// Only b's, once a's session is back.
					e.waitFor("a's nodes gone", func() bool { return len(e.children(lock)) == 1 })
				}
				must(t, b.Unlock(ctx), "b: Unlock")
				e.empty(lock)
				if err := a.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
					t.Errorf("a: Unlock after a failed Requeue = %v, want ErrNotHeld", err)
				}
			})
		}
	}
}
