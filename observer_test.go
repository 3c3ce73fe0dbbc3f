package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holdLog records what a recipe Observer is told, one line per event:
// "granted mutex /path token>0" and so on.
type holdLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *holdLog) observer() *zkrecipes.Observer {
	add := func(what string) func(zkrecipes.HoldEvent) {
		return func(e zkrecipes.HoldEvent) {
			line := fmt.Sprintf("%s %s", what, e.Recipe)
			switch what {
			case "granted":
				line += fmt.Sprintf(" token:%v node:%v ahead:%d ctx:%v", e.Token > 0, strings.HasPrefix(e.Node, e.Path+"/"),
					e.Ahead, e.Context != nil && e.Context.Value(callerKey{}) == "caller")
			case "released":
				line += fmt.Sprintf(" err:%v", e.Err)
			case "lost":
				line += " " + string(e.Reason)
			}
			l.add(line)
		}
	}
	item := func(what string) func(zkrecipes.ItemEvent) {
		return func(e zkrecipes.ItemEvent) { l.add(fmt.Sprintf("%s %s", what, e.Recipe)) }
	}
	return &zkrecipes.Observer{Queued: add("queued"), Granted: add("granted"), Abandoned: add("abandoned"),
		Released: add("released"), Lost: add("lost"), Offered: item("offered"), Taken: item("taken"),
		Resynced: func(e zkrecipes.ResyncEvent) { l.add(fmt.Sprintf("resynced %d", e.Nodes)) }}
}

func (l *holdLog) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// callerKey marks the context of the calls TestObserverLife makes, which
// the events must carry.
type callerKey struct{}

func (l *holdLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "; ")
	l.lines = nil
	return s
}

// TestObserverLife follows contenders of each recipe kind through the
// Observer: one end for each grant, a Requeue as a release and a new
// queue, and a session's close as the loss of what it still held.
func TestObserverLife(t *testing.T) {
	e := newEnv(t)
	var l holdLog
	s := e.session(zkrecipes.WithObserver(l.observer()))
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "caller"), zktest.Bound(30*time.Second))
	defer cancel()
	step := func(what, want string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := l.take(); got != want {
			t.Errorf("%s told:\n%s\nwant:\n%s", what, got, want)
		}
	}

	m := zkrecipes.NewMutex(s, e.path+"/lock")
	step("Lock", "queued mutex; granted mutex token:true node:true ahead:0 ctx:true", m.Lock(ctx))
	step("Requeue", "released mutex err:<nil>; queued mutex; granted mutex token:true node:true ahead:0 ctx:true", m.Requeue(ctx))

	// A second contender queues behind the holder: one ahead of it.
	m2 := zkrecipes.NewMutex(s, e.path+"/lock")
	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	zktest.Eventually(t, 10*time.Second, "the second contender's node", func() error {
		n, _, err := s.Client().Children(ctx, e.path+"/lock")
		if err == nil && len(n) < 2 {
			err = fmt.Errorf("%d contenders, want 2", len(n))
		}
		return err
	})
	step("Lock behind", "queued mutex", nil)
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The holder's Released and the waiter's Granted are told on their own
	// goroutines, in either order (the waiter may hold before Unlock
	// returns): compare them as a set.
	must(t, <-locked, "the waiter's Lock")
	l.mu.Lock()
	got := slices.Sorted(slices.Values(l.lines))
	l.lines = nil
	l.mu.Unlock()
	if want := []string{"granted mutex token:true node:true ahead:1 ctx:true", "released mutex err:<nil>"}; !slices.Equal(got, want) {
		t.Errorf("Unlock, then the waiter told %q, want %q in any order", got, want)
	}
	step("Unlock", "released mutex err:<nil>", m2.Unlock(ctx))

	rw := zkrecipes.NewRWMutex(s, e.path+"/rw")
	step("RLock", "queued read; granted read token:true node:true ahead:0 ctx:true", rw.RLock(ctx))
	step("RUnlock", "released read err:<nil>", rw.RUnlock(ctx))

	el := zkrecipes.NewElection(s, e.path+"/elect", "me")
	step("Campaign", "queued election; granted election token:true node:true ahead:0 ctx:true", el.Campaign(ctx))

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.take(); got != "lost election closed" {
		t.Errorf("Close told %q, want the election lost (closed)", got)
	}
	el.Resign(ctx)
	if got := l.take(); got != "" {
		t.Errorf("Resign after the loss told %q, want nothing", got)
	}
}

// TestObserverRecipes follows the holders of the other recipes through the
// Observer, as TestObserverLife does for locks and elections: semaphore
// leases, LockingQueue items, group memberships and discovery
// registrations, each told queued, then granted or abandoned, then one
// end; and the items offered to and taken from both queues.
func TestObserverRecipes(t *testing.T) {
	e := newEnv(t)
	var l holdLog
	s := e.session(zkrecipes.WithObserver(l.observer()))
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "caller"), zktest.Bound(30*time.Second))
	defer cancel()
	step := func(what, want string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := l.take(); got != want {
			t.Errorf("%s told:\n%s\nwant:\n%s", what, got, want)
		}
	}
	granted := func(recipe string) string { return "granted " + recipe + " token:false node:true ahead:0 ctx:true" }

	sem := zkrecipes.NewSemaphore(s, e.path+"/sem", 1)
	lease, err := sem.Acquire(ctx)
	step("Acquire", "queued semaphore; "+granted("semaphore"), err)
	_, err = sem.TryAcquire(ctx)
	if !errors.Is(err, zkrecipes.ErrLocked) {
		t.Fatalf("TryAcquire of a taken permit = %v, want ErrLocked", err)
	}
	step("TryAcquire refused", "queued semaphore; abandoned semaphore", nil)
	step("Release", "released semaphore err:<nil>", lease.Release(ctx))
	if lease.Release(ctx) == nil {
		t.Fatal("a second Release succeeded")
	}
	step("Release again", "", nil)

	lq := zkrecipes.NewLockingQueue(s, e.path+"/lq")
	step("LockingQueue Offer", "offered lqueue", lq.Offer(ctx, []byte("a")))
	step("LockingQueue Offer", "offered lqueue", lq.Offer(ctx, []byte("b")))
	it, err := lq.Take(ctx)
	step("LockingQueue Take", "queued lqueue; "+granted("lqueue")+"; taken lqueue", err)
	step("QueueItem Release", "released lqueue err:<nil>", it.Release(ctx))
	it, err = lq.Take(ctx)
	step("LockingQueue Take", "queued lqueue; "+granted("lqueue")+"; taken lqueue", err)
	step("QueueItem Consume", "released lqueue err:<nil>", it.Consume(ctx))

	q := zkrecipes.NewQueue(s, e.path+"/q")
	step("Queue Offer", "offered queue", q.Offer(ctx, []byte("a")))
	step("Queue Offer", "offered queue", q.Offer(ctx, []byte("b")))
	_, err = q.Take(ctx)
	step("Queue Take", "taken queue", err)
	_, ok, err := q.Poll(ctx)
	step("Queue Poll", "taken queue", err)
	_, ok2, err := q.Poll(ctx)
	step("Queue Poll (empty)", "", err)
	if !ok || ok2 {
		t.Fatalf("Poll took %v, then %v from an empty queue", ok, ok2)
	}

	g, err := zkrecipes.JoinGroup(ctx, s, e.path+"/group", "m1", nil)
	step("JoinGroup", "queued member; "+granted("member"), err)
	_, err = zkrecipes.JoinGroup(ctx, s, e.path+"/group", "m1", nil)
	if !errors.Is(err, zkrecipes.ErrMemberExists) {
		t.Fatalf("JoinGroup of a taken id = %v, want ErrMemberExists", err)
	}
	step("JoinGroup refused", "queued member; abandoned member", nil)
	step("Leave", "released member err:<nil>", g.Leave(ctx))

	d := zkrecipes.NewDiscovery(s, e.path+"/disc")
	r, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "a", Address: "10.0.0.1", Port: 80})
	step("Register", "queued registration; "+granted("registration"), err)
	step("Unregister", "released registration err:<nil>", r.Unregister(ctx))
}

// TestObserverExpiry: the holdings of a session that expires are each told
// lost once, as expired, and their release afterwards tells nothing more.
func TestObserverExpiry(t *testing.T) {
	e := newEnv(t)
	var l holdLog
	s := e.session(zkrecipes.WithObserver(l.observer()))
	ctx := ctxTimeout(t, 30*time.Second)
	lease, err := zkrecipes.NewSemaphore(s, e.path+"/sem", 2).Acquire(ctx)
	must(t, err, "Acquire")
	g, err := zkrecipes.JoinGroup(ctx, s, e.path+"/group", "m1", nil)
	must(t, err, "JoinGroup")
	l.take()

	e.expire(s)
	closed(t, lease.Lost(), "the lease's Lost")
	closed(t, g.Lost(), "the membership's Lost")
	lease.Release(ctx)
	g.Leave(ctx)
	l.mu.Lock()
	got := slices.Sorted(slices.Values(l.lines))
	l.mu.Unlock()
	if want := []string{"lost member expired", "lost semaphore expired"}; !slices.Equal(got, want) {
		t.Fatalf("the expiry told %q, want %q", got, want)
	}
}

// TestObserverCacheResync: a Cache's re-read after its connection was cut
// is told as Resynced, and its initial load is not.
func TestObserverCacheResync(t *testing.T) {
	e := newEnv(t)
	root := e.path + "/tree"
	e.mkdirs(root + "/a")
	var l holdLog
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()}, zkrecipes.WithObserver(l.observer()))
	c := newCache(t, s, root)
	if got := l.take(); got != "" {
		t.Fatalf("the initial load told %q, want nothing", got)
	}
	p.Cut()
	e.waitFor("the resync to be told", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.lines) > 0
	})
	if got := l.take(); got != "resynced 2" {
		t.Fatalf("the reconnection told %q, want one resync of the 2 nodes", got)
	}
	if passes, _ := zkrecipes.CacheCounts(c); passes != 2 {
		t.Fatalf("the cache read the tree %d times, want 2", passes)
	}
}

// releaseErrs records the errors of the Released events told.
func releaseErrs(mu *sync.Mutex, errs *[]error) *zkrecipes.Observer {
	return &zkrecipes.Observer{Released: func(e zkrecipes.HoldEvent) {
		mu.Lock()
		*errs = append(*errs, e.Err)
		mu.Unlock()
	}}
}
