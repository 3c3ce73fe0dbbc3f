package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	curatorItem = regexp.MustCompile(`^qn-\d{10}$`)
	kazooItem   = regexp.MustCompile(`^entry-\d{3}-\d{10}$`)
)

// TestQueueLayout: items are persistent "qn-<seq>" nodes (kazoo's
// "entry-<priority>-<seq>" with WithKazooNames) holding the data, taken in
// name order; Peek, Poll and Len agree.
func TestQueueLayout(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	s := e.session()
	q := zkrecipes.NewQueue(s, path)

	if _, ok, err := q.Poll(ctx); ok || err != nil {
		t.Errorf("Poll of a missing queue = %v, %v", ok, err)
	}
	for i := range 3 {
		must(t, q.Offer(ctx, fmt.Appendf(nil, "c%d", i)), "Offer")
	}
	kq := zkrecipes.NewQueue(s, path, zkrecipes.WithKazooNames())
	must(t, kq.OfferPriority(ctx, []byte("k-low"), 200), "OfferPriority")
	must(t, kq.Offer(ctx, []byte("k-default")), "Offer")
	must(t, kq.OfferPriority(ctx, []byte("k-high"), 5), "OfferPriority")
	if err := q.OfferPriority(ctx, nil, 1); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("OfferPriority with Curator's names = %v, want ErrInvalidArgument", err)
	}
	if err := kq.OfferPriority(ctx, nil, 1000); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("OfferPriority(1000) = %v, want ErrInvalidArgument", err)
	}
	_, err := e.admin.Create(path+"/foreign", []byte("x"), zkclient.Persistent, openACL)
	must(t, err, "create")

	var curator, kazoo int
	for _, k := range e.children(path) {
		_, st, err := e.admin.Get(path + "/" + k)
		must(t, err, "get")
		switch {
		case st.EphemeralOwner != 0:
			t.Errorf("item %s is ephemeral", k)
		case curatorItem.MatchString(k):
			curator++
		case kazooItem.MatchString(k):
			kazoo++
		case k != "foreign":
			t.Errorf("unexpected node %s", k)
		}
	}
	if curator != 3 || kazoo != 3 {
		t.Errorf("%d Curator and %d kazoo items, want 3 of each", curator, kazoo)
	}
	if n, err := q.Len(ctx); n != 6 || err != nil {
		t.Errorf("Len = %d, %v; want 6", n, err)
	}
	if data, ok, err := q.Peek(ctx); string(data) != "k-high" || !ok || err != nil {
		t.Errorf("Peek = %q, %v, %v; want the highest kazoo priority first", data, ok, err)
	}
	// kazoo's names sort before Curator's; within each, priority then age.
	want := []string{"k-high", "k-default", "k-low", "c0", "c1", "c2"}
	for i, w := range want {
		var data []byte
		var err error
		if i%2 == 0 {
			data, err = q.Take(ctx)
		} else {
			var ok bool
			data, ok, err = kq.Poll(ctx)
			if !ok && err == nil {
				err = errors.New("empty")
			}
		}
		if string(data) != w || err != nil {
			t.Errorf("item %d: %q, %v; want %q", i, data, err, w)
		}
	}
	if _, ok, err := q.Peek(ctx); ok || err != nil {
		t.Errorf("Peek of an empty queue = %v, %v", ok, err)
	}
	if kids := e.children(path); !slices.Equal(kids, []string{"foreign"}) {
		t.Errorf("left: %v; want the foreign node only", kids)
	}
}

// TestQueuePathKinds: a queue path made for Curator's names is a container,
// as Curator makes it, and one made for kazoo's is persistent, as kazoo
// makes it (kazoo's producers make it once, and fail if the server removed
// it). Real ZooKeeper checks containers every minute; zkserver can be told
// to check now.
func TestQueuePathKinds(t *testing.T) {
	srv := zkserver.RunT(t)
	e := newEnvOn(t, []string{srv.Addr()})
	ctx := ctxTimeout(t, 30*time.Second)
	s := e.session()
	curator, kazoo := e.path+"/curator", e.path+"/kazoo"
	for _, q := range []*zkrecipes.Queue{zkrecipes.NewQueue(s, curator), zkrecipes.NewQueue(s, kazoo, zkrecipes.WithKazooNames())} {
		must(t, q.Offer(ctx, []byte("x")), "Offer")
		if _, err := q.Take(ctx); err != nil {
			t.Fatalf("Take: %v", err)
		}
	}
	srv.CheckContainers()
	if _, ok, _ := e.admin.Exists(curator); ok {
		t.Errorf("the empty Curator-named queue %s was not removed: not a container", curator)
	}
	if _, ok, _ := e.admin.Exists(kazoo); !ok {
		t.Errorf("the empty kazoo-named queue %s was removed: not persistent", kazoo)
	}
}

// TestQueueExactlyOnce: consumers on four sessions take items while two
// producers offer them; every item is taken exactly once, and the waiting
// consumers stop when their context ends.
func TestQueueExactlyOnce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	path := e.path + "/q"
	const producers, each, consumers = 2, 50, 4

	e.shareItems(ctx, producers, each, consumers, func(i int, s *zkrecipes.Session) func(context.Context) ([]byte, bool) {
		q := zkrecipes.NewQueue(s, path)
		return func(cctx context.Context) ([]byte, bool) {
			data, err := q.Take(cctx)
			if cctx.Err() != nil {
				return nil, false
			}
			if !check(t, err, "consumer %d: Take", i) {
				return nil, false
			}
			return data, true
		}
	}, func(s *zkrecipes.Session) func(context.Context, []byte) error {
		return zkrecipes.NewQueue(s, path).Offer
	})
	e.empty(path)
}

// TestQueueTakeWaits: Take waits for an item, wakes when one is offered, and
// when cancelled leaves its watch behind on neither side.
func TestQueueTakeWaits(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	cs := e.session()
	consumer := zkrecipes.NewQueue(cs, path)
	producer := zkrecipes.NewQueue(e.session(), path)

	var got []byte
	done := async(func() (err error) { got, err = consumer.Take(ctx); return err })
	e.waitFor("Take to watch the missing queue", func() bool { return watchersOf(t, e.servers[0], path) == 1 })
	blocked(t, done, "Take of a missing queue")
	must(t, producer.Offer(ctx, []byte("one")), "Offer")
	if err := result(t, done, "Take"); err != nil || string(got) != "one" {
		t.Errorf("Take = %q, %v; want one", got, err)
	}

	// Waiting on a child watch now, which ZooKeeper's four-letter words do
	// not list: the session's counters tell.
	listed := cs.Stats().Listings
	tctx, cancel := context.WithCancel(ctx)
	done = async(func() error { _, err := consumer.Take(tctx); return err })
	e.waitFor("Take to list the empty queue", func() bool { return cs.Stats().Listings > listed })
	cancel()
	if err := result(t, done, "cancelled Take"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Take = %v, want context.Canceled", err)
	}
	// Its watch is gone from the server: a change sends the session no
	// event. The Take may have been cancelled with its listing on the way:
	// the watch that listing sets is removed by a request the client sends
	// when the listing's answer comes in. The first round trip takes that
	// answer in; the second is answered after the removal.
	roundTrip(t, cs)
	roundTrip(t, cs)
	seen := cs.Stats().WatchEvents
	_, err := e.admin.Create(path+"/x", nil, zkclient.Persistent, openACL)
	must(t, err, "create")
	must(t, e.admin.Delete(path+"/x", -1), "delete")
	roundTrip(t, cs)
	if n := cs.Stats().WatchEvents - seen; n != 0 {
		t.Errorf("%d watch events after the cancelled Take", n)
	}

	// A cancelled Offer adds nothing.
	octx, cancel := context.WithCancel(ctx)
	cancel()
	if err := producer.Offer(octx, []byte("never")); !errors.Is(err, context.Canceled) {
		t.Errorf("Offer with a cancelled context = %v", err)
	}
	e.empty(path)
}

// TestQueueSessionExpiry: a Take waiting on an expired session returns
// ErrSessionExpired.
func TestQueueSessionExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := e.session()
	q := zkrecipes.NewQueue(s, e.path+"/q")
	done := async(func() error { _, err := q.Take(ctx); return err })
	e.waitFor("Take to watch", func() bool { return watchersOf(t, e.servers[0], e.path+"/q") == 1 })
	e.expire(s)
	if err := result(t, done, "Take"); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Take on an expired session = %v, want ErrSessionExpired", err)
	}
}

// TestQueueUnconfirmed: the answer to a take's delete or an offer's create is
// lost. A delete that never reached the server is sent again and the item
// taken. One that did not either, while another consumer took the item,
// cannot be told from one that was applied: Take returns the data with
// ErrWriteUnconfirmed. An offer's create is unconfirmed either way (the
// server names the node).
func TestQueueUnconfirmed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	path := e.path + "/q"
	p := e.proxy()
	q := zkrecipes.NewQueue(e.sessionOn([]string{p.Addr()}), path)
	for _, d := range []string{"a", "b", "c"} {
		must(t, q.Offer(ctx, []byte(d)), "Offer")
	}

	p.CutOnRequest(2, false) // delete, dropped
	if data, err := q.Take(ctx); string(data) != "a" || err != nil {
		t.Errorf("Take whose delete never arrived = %q, %v; want a", data, err)
	}

	// Dropped again, and another consumer takes the item before this one
	// is back.
	var data []byte
	err := cutWhile(t, p, 2, "the delete trap", "Take", func() (err error) { data, err = q.Take(ctx); return err }, func() {
		kids := e.children(path)
		slices.Sort(kids)
		must(t, e.admin.Delete(path+"/"+kids[0], -1), "delete b")
	})
	if string(data) != "b" || !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
		t.Errorf("Take whose item went while its delete was lost = %q, %v; want b and ErrWriteUnconfirmed", data, err)
	}

	// Armed to forward: applied, unless the request went out on the
	// previous, dying connection (the client may not know it is dead yet
	// when the call is made) and never reached the trap; either
	// way the item is taken once.
	p.CutOnRequest(2, true)
	data, err = q.Take(ctx)
	if string(data) != "c" || err != nil && !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
		t.Errorf("Take whose delete was sent, answer lost = %q, %v; want c, unconfirmed or not", data, err)
	}
	for _, forward := range []bool{false, true} {
		p.CutOnRequest(1, forward)
		if err := q.Offer(ctx, []byte("d")); !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
			t.Errorf("Offer with its create cut (sent on: %v) = %v, want ErrWriteUnconfirmed", forward, err)
		}
	}
	for _, k := range e.children(path) {
		if d, _, _ := e.admin.Get(path + "/" + k); string(d) != "d" {
			t.Errorf("item %s = %q left in the queue", k, d)
		}
	}
}

// lateOffers gives the TestQueueOfferLate tests a queue (its path made
// first, so that an Offer sends nothing but its create) on a session
// behind a proxy, a consumer on a session of its own, and the offer of
// item "x".
func lateOffers(t *testing.T) (e *env, p *zktest.Proxy, path string, consumer *zkrecipes.Queue, offer func(context.Context) error) {
	e = newEnv(t)
	path = e.path + "/q"
	e.mkdirs(path)
	p = e.proxy()
	q := zkrecipes.NewQueue(e.sessionOn([]string{p.Addr()}), path)
	return e, p, path, zkrecipes.NewQueue(e.session(), path), func(ctx context.Context) error { return q.Offer(ctx, []byte("x")) }
}

// TestQueueOfferLateWithdrawn: an Offer whose context ends while the
// answer to its create is late (the item is on the server) waits for the
// answer and withdraws the item: it returns the context's error, and the
// queue holds nothing.
func TestQueueOfferLateWithdrawn(t *testing.T) {
	e, p, path, _, offer := lateOffers(t)
	err := e.offerLate(p, path, offer, func(string) {}, p.Pass)
	if !errors.Is(err, context.Canceled) || errors.Is(err, zkrecipes.ErrWriteUnconfirmed) {
		t.Errorf("Offer cancelled with its answer late = %v, want the context's error", err)
	}
	e.empty(path)
}

// TestQueueOfferLateTaken: as above, but a consumer takes the item before
// the answer comes: it cannot be withdrawn, it was offered, and Offer
// returns nil; the consumer had it, once.
func TestQueueOfferLateTaken(t *testing.T) {
	e, p, path, consumer, offer := lateOffers(t)
	ctx := ctxTimeout(t, 30*time.Second)
	err := e.offerLate(p, path, offer, func(string) {
		data, err := consumer.Take(ctx)
		must(t, err, "the consumer's Take")
		if string(data) != "x" {
			t.Errorf("the consumer took %q", data)
		}
	}, p.Pass)
	if err != nil {
		t.Errorf("Offer cancelled with its answer late, the item taken meanwhile = %v, want nil", err)
	}
	e.empty(path)
}

// TestQueueOfferLateLost: the late answer is lost with the connection
// (and the session kept from reconnecting): Offer cannot tell whether the
// item was added (it was) and says so with ErrWriteUnconfirmed, not with
// the bare context's error.
func TestQueueOfferLateLost(t *testing.T) {
	e, p, path, consumer, offer := lateOffers(t)
	ctx := ctxTimeout(t, 30*time.Second)
	err := e.offerLate(p, path, offer, func(string) {}, func() {
		p.Refuse(true)
		p.Cut()
	})
	p.Pass()
	p.Refuse(false)
	if !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) || !errors.Is(err, context.Canceled) {
		t.Errorf("Offer cancelled, its answer lost = %v, want ErrWriteUnconfirmed (of context.Canceled)", err)
	}
	if data, ok, err := consumer.Poll(ctx); err != nil || !ok || string(data) != "x" {
		t.Errorf("Poll for the unconfirmed item = %q, %v, %v; want x", data, ok, err)
	}
}

// TestQueueOfferLateWithdrawalLost: the answer comes, but the delete that
// withdraws the item is lost (dropped, the connection cut): Offer cannot
// tell its delete from a consumer's and says ErrWriteUnconfirmed; the item
// is still there.
func TestQueueOfferLateWithdrawalLost(t *testing.T) {
	e, p, path, consumer, offer := lateOffers(t)
	ctx := ctxTimeout(t, 30*time.Second)
	err := e.offerLate(p, path, offer, func(string) {}, func() {
		p.CutOnRequest(2, false) // delete, dropped
		p.Pass()
	})
	closed(t, p.Tripped(), "the withdrawal's delete trap")
	if !errors.Is(err, zkrecipes.ErrWriteUnconfirmed) || !errors.Is(err, context.Canceled) {
		t.Errorf("Offer cancelled, its withdrawal lost = %v, want ErrWriteUnconfirmed (of context.Canceled)", err)
	}
	if data, ok, err := consumer.Poll(ctx); err != nil || !ok || string(data) != "x" {
		t.Errorf("Poll for the item not withdrawn = %q, %v, %v; want x", data, ok, err)
	}
}

// TestCancelledBeforeSendsNothing: a call whose context has ended before
// it begins sends no create and makes nothing, for every recipe that makes
// a node of the caller's own (one create path, requests.go's create). With
// the first create sent regardless, its answer could come in before the
// call looked at its context, and a cancelled Offer made its item (seen
// once in a gate, TestLockingQueueTakeCancelled).
func TestCancelledBeforeSendsNothing(t *testing.T) {
	e := newEnv(t)
	s := e.session()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := e.path
	calls := map[string]func() error{
		"Queue.Offer":        func() error { return zkrecipes.NewQueue(s, p+"/q").Offer(ctx, []byte("x")) },
		"LockingQueue.Offer": func() error { return zkrecipes.NewLockingQueue(s, p+"/lq").Offer(ctx, []byte("x")) },
		"Mutex.Lock":         func() error { return zkrecipes.NewMutex(s, p+"/m").Lock(ctx) },
		"Election.Campaign":  func() error { return zkrecipes.NewElection(s, p+"/e", "c").Campaign(ctx) },
		"Barrier.Set":        func() error { return zkrecipes.NewBarrier(s, p+"/b").Set(ctx) },
		"DoubleBarrier.Enter": func() error {
			return zkrecipes.NewDoubleBarrier(s, p+"/db", 2).Enter(ctx)
		},
		"JoinGroup": func() error { _, err := zkrecipes.JoinGroup(ctx, s, p+"/g", "m", nil); return err },
		"Discovery.Register": func() error {
			_, err := zkrecipes.NewDiscovery(s, p+"/d").Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "a"})
			return err
		},
		"CreatePersistentNode": func() error {
			_, err := zkrecipes.CreatePersistentNode(ctx, s, p+"/n", nil, zkclient.Ephemeral)
			return err
		},
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		before := s.Stats().Creates
		if err := calls[name](); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context = %v, want context.Canceled", name, err)
		}
		if n := s.Stats().Creates - before; n != 0 {
			t.Errorf("%s with an ended context sent %d creates", name, n)
		}
	}
	e.empty(p)
}
