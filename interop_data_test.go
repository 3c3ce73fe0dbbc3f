package zkrecipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// TestDataRecipesInterop runs the counters, the queues and service discovery
// on one path with their Curator (and kazoo) counterparts at the same time,
// the Java side compiled once for all.
func TestDataRecipesInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	connect := strings.Join(e.servers, ",")
	args := func(recipe, path, id string, count int, start string) interop.Args {
		return interop.Args{Connect: connect, Path: path, Recipe: recipe, Count: count, Marker: t.TempDir(), ID: id, StartFile: start}
	}
	t.Run("counters", func(t *testing.T) { counterInterop(t, e, ctx, curator, args) })
	t.Run("queue", func(t *testing.T) { queueInterop(t, e, ctx, curator, args) })
	t.Run("locking-queue", func(t *testing.T) { lockingQueueInterop(t, e, ctx, args) })
	t.Run("discovery", func(t *testing.T) { discoveryInterop(t, e, ctx, curator, args) })
	t.Run("provider", func(t *testing.T) { providerInterop(t, e, ctx, curator, args) })
}

type contenderArgs func(recipe, path, id string, count int, start string) interop.Args
type curatorCmd func(context.Context, ...string) *exec.Cmd

// counterInterop: Curator's SharedCount and DistributedAtomicLong (promoted
// to a lock) and zkrecipes' add to the same two counters at once; no
// addition is lost.
func counterInterop(t *testing.T, e *env, ctx context.Context, curator curatorCmd, args contenderArgs) {
	count, lock := e.path+"/shared-count", e.path+"/atomic-long-lock"
	long := e.path + "/atomic-long"
	start := filepath.Join(t.TempDir(), "start")
	promoted := args("atomic-long", long, "curator-long", 50, start)
	promoted.LockPath = lock
	procs := startReady(t,
		curator(ctx, argv(t, args("shared-count", count, "curator-count", 50, start))...),
		curator(ctx, argv(t, promoted)...))
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")
	var wg sync.WaitGroup
	for i := range 2 {
		c := zkrecipes.NewSharedCount(e.session(), count, 0)
		a := zkrecipes.NewAtomicLong(e.session(), long, zkrecipes.WithPromotion(lock, 1))
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 25 {
				if !check(t, incrementShared(ctx, c), "zkrecipes-%d: increment the shared count", i) {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := a.Add(ctx, 1); !check(t, err, "zkrecipes-%d: Add", i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range procs {
		p.wait(t)
	}
	s := e.session()
	if v, err := zkrecipes.NewSharedCount(s, count, 0).Count(ctx); v.Value != 100 || err != nil {
		t.Errorf("shared count %+v, %v after 50 Curator and 50 zkrecipes increments", v, err)
	}
	if v, err := zkrecipes.NewAtomicLong(s, long).Get(ctx); v != 100 || err != nil {
		t.Errorf("atomic long %d, %v after 50 Curator and 50 zkrecipes increments", v, err)
	}
	e.empty(lock)
}

// queueInterop: Curator, kazoo and zkrecipes producers (Curator's names,
// kazoo's, and zkrecipes' own in Curator's) and consumers on one queue at
// once; every item is taken exactly once. Each consumer takes a fixed
// number. Curator's takes only Curator's names (60 of the 90); kazoo's and
// zkrecipes' take any. zkrecipes' consumers take goEarly alongside the
// others, and the rest once both are done: so, however the takes
// interleave, at least 60-10-20 of Curator's names are left for Curator's
// 20. (With all 50 at once, zkrecipes' consumers once took so many of
// Curator's names that Curator's consumer never got its 20.)
func queueInterop(t *testing.T, e *env, ctx context.Context, curator curatorCmd, args contenderArgs) {
	path := e.path + "/queue"
	start := filepath.Join(t.TempDir(), "start")
	const each, curatorTakes, kazooTakes, goTakes, goEarly = 30, 20, 20, 50, 10
	procs := startReady(t,
		curator(ctx, argv(t, args("queue-offer", path, "curator", each, start))...),
		curator(ctx, argv(t, args("queue-take", path, "curator-taker", curatorTakes, start))...),
		interop.Kazoo(ctx, argv(t, args("queue-offer", path, "kazoo", each, start))...),
		interop.Kazoo(ctx, argv(t, args("queue-take", path, "kazoo-taker", kazooTakes, start))...))
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")

	takers := make(chan struct{}) // closed once Curator's and kazoo's consumers are done
	go func() {
		<-procs[1].done
		<-procs[3].done
		close(takers)
	}()
	producer := zkrecipes.NewQueue(e.session(), path)
	taken := goQueueSide(t, e, ctx, each, goTakes, goEarly, takers, producer.Offer, func(i int, s *zkrecipes.Session) func() ([]byte, bool) {
		q := zkrecipes.NewQueue(s, path)
		return func() ([]byte, bool) {
			data, err := q.Take(ctx)
			if !check(t, err, "zkrecipes-%d: Take", i) {
				return nil, false
			}
			return data, true
		}
	})
	for _, p := range procs {
		p.wait(t)
		taken = append(taken, p.items()...)
	}
	var want []string
	for _, who := range []string{"curator", "kazoo", "go"} {
		for n := 1; n <= each; n++ {
			want = append(want, fmt.Sprintf("%s-%d", who, n))
		}
	}
	slices.Sort(want)
	slices.Sort(taken)
	if !slices.Equal(taken, want) {
		t.Errorf("items taken (%d):\n%v\nwant each of the %d offered once", len(taken), taken, len(want))
	}
	e.empty(path)
}

// lockingQueueInterop: kazoo's LockingQueue and zkrecipes' share producers
// and consumers; a zkrecipes consumer holding an item when its session
// expires loses it to the others. Every item is consumed exactly once.
func lockingQueueInterop(t *testing.T, e *env, ctx context.Context, args contenderArgs) {
	path := e.path + "/locking-queue"
	start := filepath.Join(t.TempDir(), "start")
	const each, kazooTakes = 20, 15
	producer := zkrecipes.NewLockingQueue(e.session(), path)
	must(t, producer.Offer(ctx, []byte("go-0")), "Offer")
	crashing := e.session()
	lost, err := zkrecipes.NewLockingQueue(crashing, path).Take(ctx)
	must(t, err, "Take")

	procs := startReady(t,
		interop.Kazoo(ctx, argv(t, args("locking-queue-offer", path, "kazoo", each, start))...),
		interop.Kazoo(ctx, argv(t, args("locking-queue-take", path, "kazoo-taker", kazooTakes, start))...))
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")
	e.expire(crashing)
	closed(t, lost.Lost(), "the expired consumer's item")

	taken := goQueueSide(t, e, ctx, each, 2*each+1-kazooTakes, 2*each+1-kazooTakes, nil, producer.Offer, func(i int, s *zkrecipes.Session) func() ([]byte, bool) {
		q := zkrecipes.NewLockingQueue(s, path)
		return func() ([]byte, bool) {
			it, err := q.Take(ctx)
			if !check(t, err, "zkrecipes-%d: Take", i) || !check(t, it.Consume(ctx), "zkrecipes-%d: Consume", i) {
				return nil, false
			}
			return it.Data(), true
		}
	})
	for _, p := range procs {
		p.wait(t)
		taken = append(taken, p.items()...)
	}
	want := []string{"go-0"}
	for _, who := range []string{"kazoo", "go"} {
		for n := 1; n <= each; n++ {
			want = append(want, fmt.Sprintf("%s-%d", who, n))
		}
	}
	slices.Sort(want)
	slices.Sort(taken)
	if !slices.Equal(taken, want) {
		t.Errorf("items consumed (%d):\n%v\nwant each of the %d offered once", len(taken), taken, len(want))
	}
	e.empty(path + "/entries")
	e.empty(path + "/taken")
}

// goQueueSide is zkrecipes' side of a queue's interop test: one producer
// offers "go-1" to "go-<each>" while two consumers, each on a session of
// its own, take takes items between them, the first early of them at once
// and the rest once later is closed; it returns the items they took.
// consumer gives consumer i's take on its session, which returns an
// item's data, or false to stop.
func goQueueSide(t *testing.T, e *env, ctx context.Context, each int, takes, early int32, later <-chan struct{}, offer func(context.Context, []byte) error,
	consumer func(i int, s *zkrecipes.Session) func() ([]byte, bool)) []string {
	var mu sync.Mutex
	var taken []string
	var reserved atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= each; n++ {
			if !check(t, offer(ctx, fmt.Appendf(nil, "go-%d", n)), "Offer") {
				return
			}
		}
	}()
	for i := range 2 {
		take := consumer(i, e.session())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := reserved.Add(1); n <= takes; n = reserved.Add(1) {
				if n > early {
					select {
					case <-later:
					case <-ctx.Done():
						return
					}
				}
				data, ok := take()
				if !ok {
					return
				}
				mu.Lock()
				taken = append(taken, string(data))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return taken
}

// discoveryInterop: an instance registered by Curator's ServiceDiscovery
// and two by zkrecipes, on one base path: Curator's ServiceCache and
// zkrecipes' Watch each see all three, with their payloads, and follow
// them going.
func discoveryInterop(t *testing.T, e *env, ctx context.Context, curator curatorCmd, args contenderArgs) {
	base := e.path + "/services"
	dir := t.TempDir()
	stopJava, stopQuery := filepath.Join(dir, "stop-java"), filepath.Join(dir, "stop-query")
	reg := args("discovery-register", base, "java-1", 0, "")
	reg.Service, reg.StopFile = "web", stopJava
	query := args("discovery-query", base, "query", 0, "")
	query.Service, query.StopFile = "web", stopQuery
	procs := startReady(t, curator(ctx, argv(t, reg)...), curator(ctx, argv(t, query)...))
	java, cache := procs[0], procs[1]
	java.waitLine(t, "REGISTERED java-1")

	d := zkrecipes.NewDiscovery(e.session(), base)
	watch, err := d.Watch(ctx, "web")
	must(t, err, "Watch")
	defer watch.Close()
	await := func(what string, ok func([]zkrecipes.ServiceInstance) bool) {
		t.Helper()
		for {
			insts, err := nextWithin(watch, 30*time.Second)
			if err != nil {
				t.Fatalf("watch: no %s within 30s: %v", what, err)
			}
			if ok(insts) {
				return
			}
		}
	}
	await("Java instance", func(insts []zkrecipes.ServiceInstance) bool {
		if len(insts) != 1 {
			return false
		}
		j := insts[0]
		if j.ID != "java-1" || string(j.Payload) != `"java-java-1"` || j.Address != "127.0.0.1" || j.Port != 9000 ||
			j.URI(nil) != "http://127.0.0.1:9000" || j.Type != "DYNAMIC" || j.RegistrationTime.IsZero() {
			t.Errorf("the Java instance reads as %+v", j)
		}
		return true
	})

	r1, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "go-1", Address: "127.0.0.1", Port: 8000, Payload: json.RawMessage(`"go-payload"`)})
	must(t, err, "Register")
	r2, err := zkrecipes.NewDiscovery(e.session(), base).Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "go-2", Address: "127.0.0.1", Port: 8001, Payload: json.RawMessage(`{"zone":"z1"}`)})
	must(t, err, "Register")
	cache.waitLine(t, "INSTANCES go-1=go-payload@127.0.0.1:8000,go-2={zone=z1}@127.0.0.1:8001,java-1=java-java-1@127.0.0.1:9000")
	await("all three", func(insts []zkrecipes.ServiceInstance) bool {
		return slices.Equal(ids(insts), []string{"go-1", "go-2", "java-1"})
	})

	must(t, r1.Unregister(ctx), "Unregister")
	cache.waitLine(t, "INSTANCES go-2={zone=z1}@127.0.0.1:8001,java-1=java-java-1@127.0.0.1:9000")
	must(t, os.WriteFile(stopJava, nil, 0o644), "stop")
	java.wait(t)
	await("the Java instance gone", func(insts []zkrecipes.ServiceInstance) bool { return slices.Equal(ids(insts), []string{"go-2"}) })
	cache.waitLine(t, "INSTANCES go-2={zone=z1}@127.0.0.1:8001")
	must(t, r2.Unregister(ctx), "Unregister")
	must(t, os.WriteFile(stopQuery, nil, 0o644), "stop")
	cache.wait(t)
	e.empty(base + "/web")
}

// javaInfoPayload is the Java contender's POJO payload, CuratorContender$Info.
type javaInfoPayload struct {
	Zone   string `json:"zone"`
	Weight int    `json:"weight"`
}

// providerInterop: Curator's ServiceProvider and zkrecipes' Provider on one
// base path agree on the usable instances (a disabled one left out by
// both), and each reads the POJO payload the other wrote as its own type.
func providerInterop(t *testing.T, e *env, ctx context.Context, curator curatorCmd, args contenderArgs) {
	base := e.path + "/services"
	stop := filepath.Join(t.TempDir(), "stop")
	a := args("discovery-provider", base, "java-p", 0, "")
	a.Service, a.StopFile = "api", stop
	java := startReady(t, curator(ctx, argv(t, a)...))[0]
	java.waitLine(t, "REGISTERED java-p")

	d := zkrecipes.NewDiscovery(e.session(), base)
	pojo, err := zkrecipes.MarshalPayload(javaInfoPayload{Zone: "go", Weight: 1}, "CuratorContender$Info")
	must(t, err, "MarshalPayload")
	var regs []*zkrecipes.Registration
	for _, in := range []zkrecipes.ServiceInstance{
		{Name: "api", ID: "go-1", Address: "127.0.0.1", Port: 8001, Payload: pojo},
		{Name: "api", ID: "go-2", Address: "127.0.0.1", Port: 8002, Payload: json.RawMessage(`{"zone":"z2"}`), Disabled: true},
		{Name: "api", ID: "go-3", Address: "127.0.0.1", Port: 8003, Payload: json.RawMessage(`{"zone":"z3"}`)},
	} {
		r, err := d.Register(ctx, in)
		must(t, err, "Register")
		regs = append(regs, r)
	}
	java.waitLine(t, "PROVIDER go-1=Info(go,1),go-3={zone=z3},java-p=Info(java,7)")

	p, err := d.Provider(ctx, "api")
	must(t, err, "Provider")
	defer p.Close()
	e.waitFor("the Go provider's instances", func() bool {
		return slices.Equal(ids(p.Instances()), []string{"go-1", "go-3", "java-p"})
	})
	j := p.Instances()[2]
	if info, err := zkrecipes.Payload[javaInfoPayload](j); err != nil || info != (javaInfoPayload{Zone: "java", Weight: 7}) {
		t.Errorf("the Java payload reads as %+v, %v (raw %s)", info, err, j.Payload)
	}
	if !strings.Contains(string(j.Payload), `"@class":"CuratorContender$Info"`) {
		t.Errorf("the Java payload %s names no class", j.Payload)
	}

	// Enabled again: both see it.
	in := regs[1].Instance()
	in.Disabled = false
	must(t, regs[1].Update(ctx, in), "Update")
	java.waitLine(t, "PROVIDER go-1=Info(go,1),go-2={zone=z2},go-3={zone=z3},java-p=Info(java,7)")
	e.waitFor("the enabled instance in the Go provider", func() bool { return len(p.Instances()) == 4 })

	for _, r := range regs {
		must(t, r.Unregister(ctx), "Unregister")
	}
	must(t, os.WriteFile(stop, nil, 0o644), "stop")
	java.wait(t)
	e.empty(base + "/api")
}
