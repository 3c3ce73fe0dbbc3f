package zkclient_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// recorder keeps what an Observer was told.
type recorder struct {
	mu       sync.Mutex
	requests []zkclient.RequestEvent
	dials    []zkclient.ConnEvent
	connects []zkclient.ConnEvent
	drops    []zkclient.ConnEvent
	states   []zkclient.State
	watches  []zkclient.Event
}

func (r *recorder) observer() *zkclient.Observer {
	return &zkclient.Observer{
		Request: func(e zkclient.RequestEvent) { r.mu.Lock(); r.requests = append(r.requests, e); r.mu.Unlock() },
		Dial:    func(e zkclient.ConnEvent) { r.mu.Lock(); r.dials = append(r.dials, e); r.mu.Unlock() },
		Connect: func(e zkclient.ConnEvent) { r.mu.Lock(); r.connects = append(r.connects, e); r.mu.Unlock() },
		Drop:    func(e zkclient.ConnEvent) { r.mu.Lock(); r.drops = append(r.drops, e); r.mu.Unlock() },
		State:   func(e zkclient.StateEvent) { r.mu.Lock(); r.states = append(r.states, e.State); r.mu.Unlock() },
		Watch:   func(e zkclient.Event) { r.mu.Lock(); r.watches = append(r.watches, e); r.mu.Unlock() },
	}
}

func (r *recorder) lock() func() { r.mu.Lock(); return r.mu.Unlock }

// snapshot copies what was told so far (a test must not fail while it
// holds r.mu: the cleanups close the client, which tells r).
func (r *recorder) snapshot() *recorder {
	defer r.lock()()
	return &recorder{
		requests: slices.Clone(r.requests),
		dials:    slices.Clone(r.dials),
		connects: slices.Clone(r.connects),
		drops:    slices.Clone(r.drops),
		states:   slices.Clone(r.states),
		watches:  slices.Clone(r.watches),
	}
}

func TestObserver(t *testing.T) {
	e := newEnv(t)
	var r recorder
	c, px := e.connectProxied(zkclient.WithObserver(r.observer()))
	p := e.base + "/n"
	if _, err := c.Create(e.ctx, p, []byte("data"), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.GetW(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(e.ctx, e.base+"/missing"); !errors.Is(err, zkclient.ErrNoNode) {
		t.Fatalf("get of a missing node: %v", err)
	}
	if _, err := c.Set(e.ctx, p, nil, -1); err != nil {
		t.Fatal(err)
	}
	<-w.Event()

	r1 := r.snapshot()
	var ops []string
	for _, q := range r1.requests {
		ops = append(ops, q.Op)
	}
	if len(r1.requests) != 4 {
		t.Fatalf("requests told: %v, want create2, getData, getData, setData", ops)
	}
	cr, miss := r1.requests[0], r1.requests[2]
	if cr.Op != "create2" || cr.Path != p || cr.Err != nil || cr.Sent <= len("data") || cr.Read <= 0 || cr.Latency <= 0 {
		t.Errorf("create told as %+v", cr)
	}
	var code zkclient.Code
	if miss.Op != "getData" || !errors.As(miss.Err, &code) || code != zkclient.ErrNoNode {
		t.Errorf("the missing get told as %+v", miss)
	}
	if len(r1.dials) != 1 || r1.dials[0].Err != nil || r1.dials[0].Server != px.Addr() {
		t.Errorf("dials told: %+v", r1.dials)
	}
	if len(r1.connects) != 1 || r1.connects[0].Err != nil || r1.connects[0].Latency <= 0 {
		t.Errorf("connects told: %+v", r1.connects)
	}
	if len(r1.watches) != 1 || r1.watches[0].Type != zkclient.EventNodeDataChanged || r1.watches[0].Path != p {
		t.Errorf("watch events told: %+v", r1.watches)
	}
	if len(r1.drops) != 0 || len(r1.states) != 1 || r1.states[0] != zkclient.StateConnected {
		t.Errorf("drops %+v, states %v before any fault", r1.drops, r1.states)
	}

	// A cut connection: one drop, Suspended, then a new connection.
	px.Cut()
	zktest.Eventually(t, 20*time.Second, "the client suspends and reconnects", func() error {
		defer r.lock()()
		if len(r.states) < 3 {
			return fmt.Errorf("states so far: %v", r.states)
		}
		return nil
	})
	r2 := r.snapshot()
	if len(r2.drops) != 1 || r2.drops[0].Err == nil || r2.drops[0].Server != px.Addr() {
		t.Errorf("drops told: %+v", r2.drops)
	}
	if r2.states[1] != zkclient.StateSuspended || r2.states[2] != zkclient.StateReconnected {
		t.Errorf("states told: %v", r2.states)
	}
	if n := len(r2.connects); n < 2 || r2.connects[n-1].Err != nil {
		t.Errorf("connects told: %+v", r2.connects)
	}
}

// BenchmarkGetObserver measures a getData round trip without and with an
// Observer: the allocations per op must be the same.
func BenchmarkGetObserver(b *testing.B) {
	zktest.SkipOrFail(b, sharedErr)
	for _, tc := range []struct {
		name string
		opts []zkclient.Option
	}{
		{"none", nil},
		{"observer", []zkclient.Option{zkclient.WithObserver(&zkclient.Observer{Request: func(zkclient.RequestEvent) {}})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := zkclient.Connect(b.Context(), []string{shared.Addr(0)}, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.Get(b.Context(), "/"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBacklog: Opened hands the new client to the Observer, and Backlog
// counts the events queued and unread in its state streams and persistent
// watches, down to zero once they are read.
func TestBacklog(t *testing.T) {
	e := newEnv(t)
	var opened []*zkclient.Client
	c := e.connect(zkclient.WithObserver(&zkclient.Observer{Opened: func(c *zkclient.Client) { opened = append(opened, c) }}))
	defer c.Close()
	if len(opened) != 1 || opened[0] != c {
		t.Fatalf("Opened told %v, want the client once", opened)
	}
	if n := c.Backlog(); n != 0 {
		t.Fatalf("Backlog of a new client = %d", n)
	}
	p := e.base + "/n"
	if _, err := c.Create(e.ctx, p, nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	w, err := c.AddWatch(e.ctx, p, false)
	if err != nil {
		t.Fatal(err)
	}
	states := c.States()
	defer states.Close()
	for range 3 {
		if _, err := c.Set(e.ctx, p, nil, -1); err != nil {
			t.Fatal(err)
		}
	}
	zktest.Eventually(t, 10*time.Second, "three events queued", func() error {
		if n := c.Backlog(); n != 3 {
			return fmt.Errorf("Backlog = %d", n)
		}
		return nil
	})
	for range 3 {
		if _, err := w.Next(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Backlog(); n != 0 {
		t.Errorf("Backlog after reading every event = %d", n)
	}
	if err := w.Remove(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCodeName(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "OK"},
		{zkclient.ErrNoNode, "NONODE"},
		{fmt.Errorf("getData /a: %w", zkclient.ErrNodeExists), "NODEEXISTS"},
		{fmt.Errorf("multi: %w", zkclient.ErrThrottled), "THROTTLEDOP"},
		{fmt.Errorf("create /a: %w", zkclient.ErrConnectionLoss), "CONNECTIONLOSS"},
		{zkclient.ErrSystem, "OTHER"}, // a code a recipe does not meet
		{fmt.Errorf("get /a: %w", zkclient.ErrClosed), "CLOSED"},
		{errors.New("something else"), "OTHER"},
	} {
		if got := zkclient.CodeName(c.err); got != c.want {
			t.Errorf("CodeName(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
