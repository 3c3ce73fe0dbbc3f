package zkrecipes_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var kazooConsumerID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestLockingQueueLayout: kazoo's layout (persistent "entries" and "taken",
// items "entries/entry-<priority>-<seq>", locks "taken/<item>" ephemeral
// with the consumer's id); Consume removes item and lock, Release only the
// lock.
func TestLockingQueueLayout(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	s := e.session()
	q := zkrecipes.NewLockingQueue(s, path)
	must(t, q.OfferPriority(ctx, []byte("low"), 300), "OfferPriority")
	must(t, q.Offer(ctx, []byte("first")), "Offer")
	must(t, q.Offer(ctx, []byte("second")), "Offer")
	for _, n := range []string{"entries", "taken"} {
		if _, st, err := e.admin.Get(path + "/" + n); err != nil || st.EphemeralOwner != 0 {
			t.Errorf("%s/%s: %v (owner %x); want a persistent node", path, n, err, st.EphemeralOwner)
		}
	}
	if n, err := q.Len(ctx); n != 3 || err != nil {
		t.Errorf("Len = %d, %v; want 3", n, err)
	}

	it, err := q.Take(ctx)
	must(t, err, "Take")
	if string(it.Data()) != "first" {
		t.Errorf("took %q, want first", it.Data())
	}
	locks := e.children(path + "/taken")
	if len(locks) != 1 || !kazooItem.MatchString(locks[0]) {
		t.Fatalf("locks %v, want one named like its item", locks)
	}
	data, st, err := e.admin.Get(path + "/taken/" + locks[0])
	must(t, err, "get lock")
	if !kazooConsumerID.Match(data) || st.EphemeralOwner != s.ID() {
		t.Errorf("lock data %q owner 0x%x; want a 32-hex consumer id, ephemeral of 0x%x", data, st.EphemeralOwner, s.ID())
	}
	// Locked items are skipped; a released one is taken again.
	it2, err := q.Take(ctx)
	must(t, err, "Take")
	if string(it2.Data()) != "second" {
		t.Errorf("second Take got %q, want second", it2.Data())
	}
	must(t, it2.Release(ctx), "Release")
	closed(t, it2.Lost(), "Lost after Release")
	if err := it2.Consume(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Consume after Release = %v, want ErrNotHeld", err)
	}
	must(t, it.Consume(ctx), "Consume")
	it3, err := q.Take(ctx)
	must(t, err, "Take")
	if string(it3.Data()) != "second" {
		t.Errorf("Take after a release got %q, want second", it3.Data())
	}
	must(t, it3.Consume(ctx), "Consume")
	if n, _ := q.Len(ctx); n != 1 {
		t.Errorf("Len = %d after consuming two of three", n)
	}
	if e.empty(path + "/taken"); len(e.children(path+"/entries")) != 1 {
		t.Errorf("entries left: %v", e.children(path+"/entries"))
	}
}

// TestLockingQueueAtLeastOnce: a consumer whose session expires while it
// holds an item loses it to another consumer, and learns it.
func TestLockingQueueAtLeastOnce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	crashing := e.session()
	a := zkrecipes.NewLockingQueue(crashing, path)
	bs := e.session()
	b := zkrecipes.NewLockingQueue(bs, path)
	must(t, a.Offer(ctx, []byte("job")), "Offer")

	it, err := a.Take(ctx)
	must(t, err, "Take")
	var got *zkrecipes.QueueItem
	listed := bs.Stats().Listings
	done := async(func() (err error) { got, err = b.Take(ctx); return err })
	e.waitFor("b to list items and locks", func() bool { return bs.Stats().Listings >= listed+2 })
	blocked(t, done, "Take of a locked item")
	e.expire(crashing)
	must(t, result(t, done, "Take after the holder's session expired"), "Take")
	if string(got.Data()) != "job" {
		t.Errorf("b took %q, want the job a lost", got.Data())
	}
	closed(t, it.Lost(), "the expired consumer's Lost")
	if err := it.Consume(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Consume on the expired session = %v, want ErrSessionExpired", err)
	}
	must(t, got.Consume(ctx), "Consume")
	e.empty(path + "/entries")
	e.empty(path + "/taken")
}

// TestLockingQueueConsumers: consumers on four sessions share the items of
// two producers; each item is taken, and consumed, exactly once.
func TestLockingQueueConsumers(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/q"
	const producers, each, consumers = 2, 25, 4
	e.shareItems(ctx, producers, each, consumers, func(i int, s *zkrecipes.Session) func(context.Context) ([]byte, bool) {
		q := zkrecipes.NewLockingQueue(s, path)
		return func(cctx context.Context) ([]byte, bool) {
			it, err := q.Take(cctx)
			if cctx.Err() != nil {
				return nil, false
			}
			if !check(t, err, "consumer %d: Take", i) || !check(t, it.Consume(ctx), "Consume") {
				return nil, false
			}
			return it.Data(), true
		}
	}, func(s *zkrecipes.Session) func(context.Context, []byte) error {
		return zkrecipes.NewLockingQueue(s, path).Offer
	})
	e.empty(path + "/entries")
	e.empty(path + "/taken")
}

// TestLockingQueueTakeCancelled: a Take cancelled while waiting leaves no
// lock behind, and a cancelled Offer no item.
func TestLockingQueueTakeCancelled(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	s := e.session()
	q := zkrecipes.NewLockingQueue(s, path)
	listed := s.Stats().Listings
	tctx, cancel := context.WithCancel(ctx)
	done := async(func() error { _, err := q.Take(tctx); return err })
	e.waitFor("Take to list both", func() bool { return s.Stats().Listings >= listed+2 })
	cancel()
	if err := result(t, done, "Take"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Take = %v", err)
	}
	if err := q.Offer(tctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Offer = %v", err)
	}
	e.empty(path + "/entries")
	e.empty(path + "/taken")
}

// A consumer whose item lock is reported lost while its session lives (a
// strict margin passed on a silent link) cannot Consume it, and gives the
// item back: another consumer takes it at once, not when the first
// session ends. (Found by the nemesis, seeds 3 and 7.)
func TestLockingQueueConsumeAfterLost(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/q"
	px := e.proxy()
	a := zkrecipes.NewLockingQueue(e.sessionOn([]string{px.Addr()}, zkrecipes.WithStrict(), zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(4*time.Second))), path)
	b := zkrecipes.NewLockingQueue(e.session(), path)
	must(t, b.Offer(ctx, []byte("job")), "Offer")
	it, err := a.Take(ctx)
	must(t, err, "a: Take")
	px.Blackhole()
	closed(t, it.Lost(), "the item's Lost on a silent link")
	px.Pass()
	px.Cut()
	if err := it.Consume(ctx); !errors.Is(err, zkrecipes.ErrNodeLost) {
		t.Fatalf("Consume after Lost = %v, want ErrNodeLost", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second) // well inside a's session timeout
	defer cancel()
	got, err := b.Take(tctx)
	if err != nil {
		t.Fatalf("b: Take of the item given back: %v", err)
	}
	if string(got.Data()) != "job" {
		t.Errorf("b took %q", got.Data())
	}
	must(t, got.Consume(ctx), "b: Consume")
}

// lateLockingOffers is lateOffers for a LockingQueue: its two nodes made
// first, the offer of item "x" behind a proxy, a consumer of its own.
func lateLockingOffers(t *testing.T) (e *env, p *zktest.Proxy, path string, consumer *zkrecipes.LockingQueue, offer func(context.Context) error) {
	e = newEnv(t)
	path = e.path + "/q"
	e.mkdirs(path + "/entries")
	e.mkdirs(path + "/taken")
	p = e.proxy()
	q := zkrecipes.NewLockingQueue(e.sessionOn([]string{p.Addr()}), path)
	return e, p, path, zkrecipes.NewLockingQueue(e.session(), path), func(ctx context.Context) error { return q.Offer(ctx, []byte("x")) }
}

// TestLockingQueueOfferLate: Offer goes the way of Queue.Offer when its
// context ends while the answer to its create is late: with nobody
// taking the item, it is withdrawn and Offer returns the context's error;
// with a consumer that consumed it, or one that holds it (locked, not yet
// consumed), before the answer came, it was offered: Offer returns nil,
// and the holder consumes it. With the withdrawal lost, Offer cannot tell:
// ErrWriteUnconfirmed, and the item is still there.
func TestLockingQueueOfferLate(t *testing.T) {
	t.Run("withdrawn", func(t *testing.T) {
		e, p, path, _, offer := lateLockingOffers(t)
		err := e.offerLate(p, path+"/entries", offer, func(string) {}, p.Pass)
		if !errors.Is(err, context.Canceled) || errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
			t.Errorf("Offer cancelled with its answer late = %v, want the context's error", err)
		}
		e.empty(path + "/entries")
		e.empty(path + "/taken")
	})
	t.Run("no lock folder", func(t *testing.T) {
		// The lock folder gone (a crash between making the two folders):
		// no consumer can hold the item, so the withdrawal deletes it.
		e, p, path, _, offer := lateLockingOffers(t)
		err := e.offerLate(p, path+"/entries", offer, func(string) {
			must(t, e.admin.Delete(path+"/taken", -1), "delete the lock folder")
		}, p.Pass)
		if !errors.Is(err, context.Canceled) || errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
			t.Errorf("Offer cancelled with its answer late, no lock folder = %v, want the context's error", err)
		}
		e.empty(path + "/entries")
	})
	t.Run("consumed", func(t *testing.T) {
		e, p, path, consumer, offer := lateLockingOffers(t)
		ctx := ctxTimeout(t, 30*time.Second)
		err := e.offerLate(p, path+"/entries", offer, func(string) {
			it, err := consumer.Take(ctx)
			must(t, err, "the consumer's Take")
			must(t, it.Consume(ctx), "the consumer's Consume")
		}, p.Pass)
		if err != nil {
			t.Errorf("Offer cancelled with its answer late, the item consumed meanwhile = %v, want nil", err)
		}
		e.empty(path + "/entries")
	})
	t.Run("held", func(t *testing.T) {
		e, p, path, consumer, offer := lateLockingOffers(t)
		ctx := ctxTimeout(t, 30*time.Second)
		var it *zkrecipes.QueueItem
		err := e.offerLate(p, path+"/entries", offer, func(string) {
			var err error
			it, err = consumer.Take(ctx)
			must(t, err, "the consumer's Take")
		}, p.Pass)
		if err != nil {
			t.Errorf("Offer cancelled with its answer late, the item held by a consumer meanwhile = %v, want nil", err)
		}
		if kids := e.children(path + "/entries"); len(kids) != 1 {
			t.Errorf("items under the consumer's lock = %v, want the one it holds", kids)
		}
		must(t, it.Consume(ctx), "the holder's Consume")
		e.empty(path + "/entries")
		e.empty(path + "/taken")
	})
	t.Run("withdrawal lost", func(t *testing.T) {
		e, p, path, consumer, offer := lateLockingOffers(t)
		ctx := ctxTimeout(t, 30*time.Second)
		err := e.offerLate(p, path+"/entries", offer, func(string) {}, func() {
			p.CutOnRequest(14, false) // the withdrawal's multi, dropped
			p.Pass()
		})
		closed(t, p.Tripped(), "the withdrawal's multi trap")
		if !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) || !errors.Is(err, context.Canceled) {
			t.Errorf("Offer cancelled, its withdrawal lost = %v, want ErrWriteUnconfirmed (of context.Canceled)", err)
		}
		it, err := consumer.Take(ctx)
		must(t, err, "Take of the item not withdrawn")
		must(t, it.Consume(ctx), "Consume")
	})
}

// TestLockingQueueTakeAnswerLost: a Take whose context ends while the
// answer to its lock's create is late, and whose connection then drops
// with that answer, does not know whether it locked the item: the lock it
// may have made is deleted in the background while the session lives, so
// the item goes to another consumer (found by the fault suite: seeds 3,
// 2704667788654528 and 5413012982913397 under a stall injector).
func TestLockingQueueTakeAnswerLost(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/q"
	e.mkdirs(path + "/entries")
	e.mkdirs(path + "/taken")
	ctx := ctxTimeout(t, 30*time.Second)
	must(t, zkrecipes.NewLockingQueue(e.session(), path).Offer(ctx, []byte("x")), "Offer")
	p := e.proxy()
	t.Cleanup(p.Pass)
	consumer := e.sessionOn([]string{p.Addr()})
	q := zkrecipes.NewLockingQueue(consumer, path)

	fired := p.PauseRepliesOnRequest(1) // the lock's create
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := async(func() error {
		_, err := q.Take(tctx)
		return err
	})
	closed(t, fired, "the lock's create sent")
	e.waitFor("the consumer's lock on the server", func() bool { return len(e.children(path+"/taken")) == 1 })
	blocked(t, done, "Take with its create's answer held")
	cancel()
	p.Cut() // the answer, lost with the connection
	p.Pass()
	if err := result(t, done, "Take"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take cancelled, its answer lost = %v, want the context's error", err)
	}
	e.waitFor("the lost Take's lock deleted", func() bool { return len(e.children(path+"/taken")) == 0 })
	if err := consumer.Err(); err != nil {
		t.Fatalf("the consumer's session ended (%v): the lock went with it, not with the clean-up", err)
	}
	it, err := zkrecipes.NewLockingQueue(e.session(), path).Take(ctx)
	must(t, err, "another consumer's Take")
	must(t, it.Consume(ctx), "another consumer's Consume")
}

// A Release the server does not answer within the session timeout reports
// ErrReleaseUnconfirmed, and gives the item back in the background once the
// server answers, while the session lives: the item is not kept from every
// other consumer until the session ends.
func TestLockingQueueReleaseUnconfirmed(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/q"
	ctx := ctxTimeout(t, 60*time.Second)
	must(t, zkrecipes.NewLockingQueue(e.session(), path).Offer(ctx, []byte("x")), "Offer")
	p := e.proxy()
	t.Cleanup(p.Pass)
	var mu sync.Mutex
	var told []error // the Observer's Released errors
	consumer := e.sessionOn([]string{p.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(2*time.Second))),
		zkrecipes.WithObserver(releaseErrs(&mu, &told)))
	it, err := zkrecipes.NewLockingQueue(consumer, path).Take(ctx)
	must(t, err, "Take")

	p.PauseReplies() // the server hears the consumer (its session lives) but never answers
	err = it.Release(ctx)
	if !errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) {
		t.Fatalf("Release without an answer = %v, want ErrReleaseUnconfirmed", err)
	}
	mu.Lock()
	if len(told) != 1 || !errors.Is(told[0], zkrecipes.ErrReleaseUnconfirmed) {
		t.Errorf("the Observer was told Released with %v, want once with ErrReleaseUnconfirmed", told)
	}
	mu.Unlock()
	if got := e.children(path + "/taken"); len(got) != 1 {
		t.Fatalf("locks while the consumer hears nothing: %v, want its lock still there", got)
	}
	p.Pass()
	e.waitFor("the item given back in the background", func() bool { return len(e.children(path+"/taken")) == 0 })
	if err := consumer.Err(); err != nil {
		t.Fatalf("the consumer's session ended (%v): the lock went with it, not with the give-back", err)
	}
	it, err = zkrecipes.NewLockingQueue(e.session(), path).Take(ctx)
	must(t, err, "another consumer's Take")
	must(t, it.Consume(ctx), "another consumer's Consume")
}
