package zkrecipes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// A waiter whose own node another client deleted must not take the lock
// when its predecessor leaves (its successor takes it): it fails with
// ErrNodeLost.
func TestMutexWaitingNodeDeleted(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock)
	base := e.lockBase(ctx, holder.Lock, "holder: Lock")
	w := zkrecipes.NewMutex(e.session(), lock)
	wc := async(func() error { return w.Lock(ctx) })
	e.waitWatches("w to watch", base+1)
	kids := e.children(lock) // the holder's node and w's, in no order
	if len(kids) != 2 {
		t.Fatalf("children %v, want the holder's and w's", kids)
	}
	bySeq := func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) }
	slices.SortFunc(kids, bySeq)
	c := zkrecipes.NewMutex(e.session(), lock)
	cc := async(func() error { return c.Lock(ctx) })
	e.waitWatches("c to watch", base+2)

	must(t, e.admin.Delete(lock+"/"+kids[1], -1), "delete w's node")
	blocked(t, cc, "c's Lock")
	must(t, holder.Unlock(ctx), "holder: Unlock")
	if err := result(t, wc, "w's Lock"); !errors.Is(err, zkrecipes.ErrNodeLost) {
		t.Errorf("w's Lock after its node was deleted = %v, want ErrNodeLost", err)
	}
	must(t, result(t, cc, "c's Lock"), "c: Lock")
	must(t, c.Unlock(ctx), "c: Unlock")
	e.empty(lock)
}

// A waiter whose watched node leaves while an earlier one still holds must
// not take the lock: the node it watched was not the last ahead of it.
func TestMutexWaiterAheadLeaves(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	holder := zkrecipes.NewMutex(e.session(), lock)
	base := e.lockBase(ctx, holder.Lock, "holder: Lock")

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	middle := async(func() error { return zkrecipes.NewMutex(e.session(), lock).Lock(cctx) })
	e.waitWatches("the middle waiter to watch", base+1)
	s := e.session()
	last := zkrecipes.NewMutex(s, lock)
	got := async(func() error { return last.Lock(ctx) })
	e.waitWatches("the last waiter to watch", base+2)

	before := s.Stats()
	cancel()
	if err := result(t, middle, "middle waiter's Lock"); err == nil {
		t.Fatal("the middle waiter's Lock succeeded after cancel")
	}
	// The last waiter hears of the deletion, lists again and watches the
	// holder; until the holder leaves it must still be waiting.
	e.waitFor("the last waiter to list again", func() bool {
		select {
		case err := <-got:
			t.Fatalf("the last waiter's Lock returned (err=%v) while the holder holds", err)
		default:
		}
		return s.Stats().Listings > before.Listings
	})
	blocked(t, got, "the last waiter's Lock")
	must(t, holder.Unlock(ctx), "holder: Unlock")
	must(t, result(t, got, "last waiter's Lock"), "last waiter: Lock")
	must(t, last.Unlock(ctx), "last waiter: Unlock")
	e.empty(lock)
}

// Tokens keep increasing when the lock path is deleted and made again (the
// sequence numbers restart there; zxids do not).
func TestMutexTokenAcrossRecreatedPath(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	m := zkrecipes.NewMutex(e.session(), lock)
	must(t, m.Lock(ctx), "Lock")
	first := m.Token()
	must(t, m.Unlock(ctx), "Unlock")
	must(t, e.admin.Delete(lock, -1), "delete the lock path")
	must(t, m.Lock(ctx), "Lock again")
	if m.Token() <= first {
		t.Errorf("token %d after the path was made again, not above the first %d", m.Token(), first)
	}
	must(t, m.Unlock(ctx), "Unlock")
}
