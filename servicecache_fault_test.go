package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// churn registers, updates and unregisters instances of the service "svc"
// on a few sessions of its own (direct to the server), and expires those
// sessions now and then; it remembers when each instance was gone for sure.
// Ids are never reused.
type churn struct {
	t   *testing.T
	e   *env
	ctx context.Context
	rnd *rand.Rand

	mu       sync.Mutex
	sessions []*zkrecipes.Session
	live     map[string]churned
	gone     map[string]time.Time // once the unregistration or expiry returned
	n        int
}

type churned struct {
	r       *zkrecipes.Registration
	session int
}

func newChurn(ctx context.Context, t *testing.T, e *env, seed uint64) *churn {
	c := &churn{t: t, e: e, ctx: ctx, rnd: rand.New(rand.NewPCG(seed, 26)),
		live: make(map[string]churned), gone: make(map[string]time.Time)}
	for range 3 {
		c.sessions = append(c.sessions, e.session())
	}
	return c
}

// step makes one change: mostly registrations, updates and
// unregistrations, sometimes the expiry of a registrant's session (all its
// instances gone at once).
func (c *churn) step(base string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range c.live {
			if !yield(id) {
				return
			}
		}
	})
	k := c.rnd.IntN(len(c.sessions))
	switch r := c.rnd.Float64(); {
	case len(ids) < 3 || r < 0.4:
		c.n++
		id := "i" + strconv.Itoa(c.n)
		reg, err := zkrecipes.NewDiscovery(c.sessions[k], base).Register(c.ctx, zkrecipes.ServiceInstance{
			Name: "svc", ID: id, Address: "127.0.0.1", Port: 1000 + c.n, Payload: []byte(`{"v":0}`)})
		must(c.t, err, "Register %s", id)
		c.live[id] = churned{reg, k}
	case r < 0.7:
		id := ids[c.rnd.IntN(len(ids))]
		in := c.live[id].r.Instance()
		in.Payload = []byte(fmt.Sprintf(`{"v":%d}`, c.rnd.IntN(1000)))
		must(c.t, c.live[id].r.Update(c.ctx, in), "Update %s", id)
	case r < 0.95:
		id := ids[c.rnd.IntN(len(ids))]
		must(c.t, c.live[id].r.Unregister(c.ctx), "Unregister %s", id)
		c.gone[id] = time.Now()
		delete(c.live, id)
	default:
		c.e.expire(c.sessions[k])
		now := time.Now()
		for id, l := range c.live {
			if l.session == k {
				c.gone[id] = now
				delete(c.live, id)
			}
		}
		c.sessions[k] = c.e.session()
	}
}

// goneAt returns when id was gone for sure, if it is.
func (c *churn) goneAt(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.gone[id]
	return g, ok
}

// converge waits until the cache holds what the server holds (ids and
// payloads), the churn being still.
func converge(t *testing.T, ctx context.Context, admin *zkrecipes.Discovery, c *zkrecipes.ServiceCache, what string) {
	t.Helper()
	show := func(insts []zkrecipes.ServiceInstance) string {
		var out string
		for _, in := range insts {
			out += in.ID + "=" + string(in.Payload) + " "
		}
		return out
	}
	zktest.Eventually(t, 30*time.Second, what, func() error {
		want, err := admin.Instances(ctx, "svc")
		if err != nil {
			return err
		}
		slices.SortFunc(want, func(a, b zkrecipes.ServiceInstance) int { return strings.Compare(a.ID, b.ID) })
		if got := c.Instances(); show(got) != show(want) {
			return fmt.Errorf("cache holds %s, server %s", show(got), show(want))
		}
		return nil
	})
}

// TestServiceCacheFaults: instances churn (registered, updated,
// unregistered, their registrant's session expired) while the link of the
// cache's session to ZooKeeper is cut again and again, delayed, cut off for
// less than the session timeout, then for longer. After each heal the
// cache converges to the server's instances. Throughout, a Provider on the
// cache never returns an instance gone for longer than the bound
// ServiceCache documents (the session timeout plus the cache's reading
// time); it refuses a copy the server has not confirmed for longer than the
// session timeout, and one whose session expired.
func TestServiceCacheFaults(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 120*time.Second)
	base := e.path + "/services"
	seed := rand.Uint64()
	t.Logf("churn seed %d", seed)
	ch := newChurn(ctx, t, e, seed)
	for range 5 {
		ch.step(base)
	}
	admin := zkrecipes.NewDiscovery(e.session(), base)
	p := e.proxy()
	cs := e.sessionOn([]string{p.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(1500*time.Millisecond))))
	pr, err := zkrecipes.NewDiscovery(cs, base).Provider(ctx, "svc")
	must(t, err, "Provider")
	defer pr.Close()
	c := pr.Cache()
	converge(t, ctx, admin, c, "the initial copy")

	// The checker: every pick the Provider would make is of an instance
	// present, or gone for less than the bound.
	bound := cs.Timeout() + zktest.Bound(time.Second)
	var stale, picked int
	stop, checked := make(chan struct{}), make(chan struct{})
	stopCheck := sync.OnceFunc(func() { close(stop); <-checked })
	defer stopCheck()
	go func() {
		defer close(checked)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		reported := make(map[string]bool)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			insts := pr.Instances()
			now := time.Now()
			for _, in := range insts {
				picked++
				if g, ok := ch.goneAt(in.ID); ok {
					stale++
					if now.Sub(g) > bound && !reported[in.ID] {
						reported[in.ID] = true
						t.Errorf("instance %s given %v after it was gone, more than the bound %v", in.ID, now.Sub(g), bound)
					}
				}
			}
		}
	}()

	// Connections cut again and again: the client reconnects at once.
	for range 5 {
		for range 4 {
			ch.step(base)
		}
		p.Cut()
	}
	converge(t, ctx, admin, c, "the copy after the cuts")

	// Delayed both ways.
	p.Delay(100 * time.Millisecond)
	for range 20 {
		ch.step(base)
	}
	p.Pass()
	converge(t, ctx, admin, c, "the copy after the delay")

	// Cut off for less than the session timeout: the same session goes on.
	p.Refuse(true)
	p.Cut()
	zktest.Eventually(t, 10*time.Second, "the cache's session disconnected", func() error {
		if cs.Connected() {
			return errors.New("connected")
		}
		return nil
	})
	for range 10 {
		ch.step(base)
	}
	p.Refuse(false)
	converge(t, ctx, admin, c, "the copy after a short cut")
	if err := cs.Err(); err != nil {
		t.Fatalf("the session ended after a cut shorter than its timeout: %v", err)
	}

	// Cut off for longer than the session timeout, churning meanwhile: the
	// Provider refuses the unconfirmed copy; the session expires, and the
	// copy stops.
	p.Refuse(true)
	p.Cut()
	zktest.Eventually(t, 30*time.Second, "the Provider refusing an unconfirmed copy", func() error {
		ch.step(base)
		if _, err := pr.Instance(); !errors.Is(err, zkrecipes.ErrStaleInstances) || !errors.Is(err, zkrecipes.ErrNoInstances) {
			return fmt.Errorf("Instance: %v", err)
		}
		return nil
	})
	zktest.Eventually(t, 30*time.Second, "the cache's session expired on the server", func() error {
		ch.step(base)
		d, err := zkadmin.Dump(ctx, e.servers[0])
		if err == nil && slices.Contains(d.Sessions, cs.ID()) {
			err = fmt.Errorf("session 0x%x still there", cs.ID())
		}
		return err
	})
	p.Refuse(false)
	select {
	case <-c.Done():
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Fatal("the cache did not stop after its session expired")
	}
	if _, err := pr.Instance(); !errors.Is(err, zkrecipes.ErrSessionExpired) || !errors.Is(err, zkrecipes.ErrNoInstances) {
		t.Errorf("Instance after the session expired: %v", err)
	}
	if insts := pr.Instances(); len(insts) != 0 {
		t.Errorf("Instances after the session expired: %v", ids(insts))
	}
	stopCheck()
	t.Logf("%d instances given, %d of them gone already (within the bound)", picked, stale)

	// A new session's cache: the server's view.
	cs2 := e.sessionOn([]string{p.Addr()})
	c2, err := zkrecipes.NewDiscovery(cs2, base).ServiceCache(ctx, "svc")
	must(t, err, "ServiceCache")
	defer c2.Close()
	converge(t, ctx, admin, c2, "a new session's copy")

	ch.mu.Lock()
	for _, l := range ch.live {
		must(t, l.r.Unregister(ctx), "Unregister")
	}
	ch.mu.Unlock()
}
