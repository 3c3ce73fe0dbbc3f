package zkrecipes_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// A lock whose node someone else deletes is no longer exclusive: the
// holder's Lost closes (a change of the node's data does not close it),
// the next contender holds, and Unlock still succeeds. A holder that
// deletes its own node by releasing leaves no watch behind.
func TestLockLostWhenNodeDeleted(t *testing.T) {
	cases := []struct {
		name   string
		lock   func(ctx context.Context, s *zkrecipes.Session, path string) (lost func() <-chan struct{}, unlock func(context.Context) error, err error)
		marker string
	}{
		{name: "mutex", marker: "-lock-", lock: func(ctx context.Context, s *zkrecipes.Session, path string) (func() <-chan struct{}, func(context.Context) error, error) {
			m := zkrecipes.NewMutex(s, path)
			return m.Lost, m.Unlock, m.Lock(ctx)
		}},
		{name: "write", marker: "__WRIT__", lock: func(ctx context.Context, s *zkrecipes.Session, path string) (func() <-chan struct{}, func(context.Context) error, error) {
			m := zkrecipes.NewRWMutex(s, path)
			return m.Lost, m.Unlock, m.Lock(ctx)
		}},
		{name: "read", marker: "__READ__", lock: func(ctx context.Context, s *zkrecipes.Session, path string) (func() <-chan struct{}, func(context.Context) error, error) {
			m := zkrecipes.NewRWMutex(s, path)
			return m.Lost, m.RUnlock, m.RLock(ctx)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxTimeout(t, time.Minute)
			path := e.path + "/lock"
			s := e.session()
			baseline := e.watches()
			lost, unlock, err := c.lock(ctx, s, path)
			must(t, err, "lock")
			e.waitWatches("the holder's watch on its node", baseline+1)
			kids := e.children(path)
			if len(kids) != 1 {
				t.Fatalf("children %v, want the holder's node", kids)
			}
			node := path + "/" + kids[0]
			// A data change is not a loss.
			if _, err := e.admin.Set(node, []byte("x"), -1); err != nil {
				t.Fatal(err)
			}
			roundTrip(t, s)
			roundTrip(t, s)
			select {
			case <-lost():
				t.Fatal("Lost closed when the node's data changed")
			default:
			}
			e.waitWatches("the watch set again", baseline+1)

			must(t, e.admin.Delete(node, -1), "delete the holder's node")
			closed(t, lost(), "Lost after the holder's node was deleted")
			must(t, unlock(ctx), "unlock after the node was deleted")

			// A normal release: the deletion fires the holder's watch,
			// which is not counted as a waiter's event.
			before := s.Stats()
			lost, unlock, err = c.lock(ctx, s, path)
			must(t, err, "lock again")
			e.waitWatches("the holder's watch on its node", baseline+1)
			must(t, unlock(ctx), "unlock")
			closed(t, lost(), "Lost after unlock")
			after := s.Stats()
			if n := after.HoldWatches - before.HoldWatches; n != 1 {
				t.Errorf("%d hold watches for one holding, want 1", n)
			}
			if n := after.HoldEvents - before.HoldEvents; n != 1 {
				t.Errorf("%d hold events for one release, want 1 (the release's own deletion)", n)
			}
			if n := after.WatchEvents - before.WatchEvents; n != 0 {
				t.Errorf("%d waiter watch events with no waiter, want 0", n)
			}
			if n := e.watches(); n != baseline {
				t.Errorf("%d watches on the server after unlock, want %d", n, baseline)
			}
			e.empty(path)
		})
	}
}
