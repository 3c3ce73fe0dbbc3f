package zkclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var all = zkclient.WorldACL(zkclient.PermAll)

func TestCRUD(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	ctx := e.ctx
	p := e.base + "/n"
	c1, err := c.Create(ctx, p, []byte("v1"), zkclient.Persistent, all)
	if err != nil || c1.Path != p {
		t.Fatalf("create: %q %v", c1.Path, err)
	}
	if _, err := c.Create(ctx, p, nil, zkclient.Persistent, all); !errors.Is(err, zkclient.ErrNodeExists) {
		t.Fatalf("create again: %v", err)
	}
	data, st, err := c.Get(ctx, p)
	if err != nil || string(data) != "v1" || st.Version != 0 || st.DataLength != 2 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	st2, err := c.Set(ctx, p, []byte("v2"), 0)
	if err != nil || st2.Version != 1 {
		t.Fatalf("set: %+v %v", st2, err)
	}
	if _, err := c.Set(ctx, p, []byte("v3"), 0); !errors.Is(err, zkclient.ErrBadVersion) {
		t.Fatalf("set old version: %v", err)
	}
	if _, ok, err := c.Exists(ctx, p+"x"); ok || err != nil {
		t.Fatalf("exists missing: %v %v", ok, err)
	}
	if _, _, err := c.Get(ctx, p+"x"); !errors.Is(err, zkclient.ErrNoNode) {
		t.Fatalf("get missing: %v", err)
	}
	var oe *zkclient.OpError
	if _, _, err := c.Get(ctx, p+"x"); !errors.As(err, &oe) || oe.Path != p+"x" || oe.Op != "get" {
		t.Fatalf("error does not name the operation: %#v", err)
	}
	// Null data reads as nil, empty data as empty.
	c.Create(ctx, p+"/null", nil, zkclient.Persistent, all)
	c.Create(ctx, p+"/empty", []byte{}, zkclient.Persistent, all)
	if d, _, _ := c.Get(ctx, p+"/null"); d != nil {
		t.Errorf("null data read as %q", d)
	}
	if d, _, _ := c.Get(ctx, p+"/empty"); d == nil || len(d) != 0 {
		t.Errorf("empty data read as %v", d)
	}
	seq, err := c.Create(ctx, p+"/s-", nil, zkclient.EphemeralSequential, all)
	if err != nil || seq.Path != p+"/s-0000000002" {
		t.Fatalf("sequential: %q %v", seq.Path, err)
	}
	kids, pst, err := c.Children(ctx, p)
	slices.Sort(kids)
	if err != nil || !slices.Equal(kids, []string{"empty", "null", "s-0000000002"}) || pst.NumChildren != 3 {
		t.Fatalf("children: %v %+v %v", kids, pst, err)
	}
	if err := c.Delete(ctx, p, -1); !errors.Is(err, zkclient.ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	eph, err := c.Ephemerals(ctx, p)
	if err != nil || !slices.Equal(eph, []string{seq.Path}) {
		t.Fatalf("ephemerals: %v %v", eph, err)
	}
	if n, err := c.AllChildrenNumber(ctx, e.base); err != nil || n != 4 {
		t.Fatalf("all children: %d %v", n, err)
	}
	if err := c.Sync(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, seq.Path+"/x", nil, zkclient.Persistent, all); !errors.Is(err, zkclient.ErrNoChildrenForEphemerals) {
		t.Fatalf("child of ephemeral: %v", err)
	}
	for _, bad := range []string{"", "rel", "/a/", "/a//b", "/a/./b", "/a\x00b"} {
		if _, _, err := c.Get(ctx, bad); !errors.Is(err, zkclient.ErrInvalidPath) {
			t.Errorf("get %q: %v", bad, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, _, err := c.Get(ctx, p); !errors.Is(err, zkclient.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestMulti(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	ctx := e.ctx
	p := e.base + "/m"
	res, err := c.Multi(ctx,
		c.CreateOp(p, []byte("x"), zkclient.Persistent, all),
		c.CreateOp(p+"/q-", nil, zkclient.PersistentSequential, all),
		c.SetOp(p, []byte("y"), 0),
		c.CheckOp(p, 1))
	if err != nil || len(res) != 4 || res[0].Path != p || res[1].Path != p+"/q-0000000000" || res[2].Stat == nil || res[2].Stat.Version != 1 {
		t.Fatalf("multi: %+v %v", res, err)
	}
	res, err = c.Multi(ctx, c.SetOp(p, []byte("z"), -1), c.CheckOp(p, 0), c.DeleteOp(p+"/q-0000000000", -1))
	if !errors.Is(err, zkclient.ErrBadVersion) || len(res) != 3 || !errors.Is(res[1].Err, zkclient.ErrBadVersion) {
		t.Fatalf("failed multi: %+v %v", res, err)
	}
	if d, _, _ := c.Get(ctx, p); string(d) != "y" {
		t.Fatalf("failed multi applied: %q", d)
	}
	rr, err := c.MultiRead(ctx, c.GetOp(p), c.ChildrenOp(p), c.GetOp(p+"/none"))
	if err != nil || len(rr) != 3 || string(rr[0].Data) != "y" || len(rr[1].Children) != 1 || !errors.Is(rr[2].Err, zkclient.ErrNoNode) {
		t.Fatalf("multiRead: %+v %v", rr, err)
	}
}

// A listing started right behind a create, without waiting, sees it: the
// server answers one session's requests in order.
func TestPipelinedInOrder(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	var calls []*zkclient.Call[zkclient.Created]
	var lists []*zkclient.Call[zkclient.Listing]
	for i := range 50 {
		calls = append(calls, c.CreateAsync(fmt.Sprintf("%s/n%02d", e.base, i), nil, zkclient.Persistent, all))
		lists = append(lists, c.ChildrenAsync(e.base))
	}
	for i := range calls {
		if _, err := calls[i].Wait(e.ctx); err != nil {
			t.Fatal(err)
		}
		l, err := lists[i].Wait(e.ctx)
		if err != nil || len(l.Names) != i+1 {
			t.Fatalf("listing %d saw %d children (%v)", i, len(l.Names), err)
		}
		if calls[i].Zxid() >= lists[i].Zxid() && calls[i].Zxid() != lists[i].Zxid() {
			t.Fatalf("zxids out of order")
		}
	}
}

func TestConcurrentReads(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	for i := range 8 {
		c.Create(e.ctx, fmt.Sprintf("%s/%d", e.base, i), []byte{byte(i)}, zkclient.Persistent, all)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				i := (g + j) % 8
				d, _, err := c.Get(e.ctx, fmt.Sprintf("%s/%d", e.base, i))
				if err != nil || !bytes.Equal(d, []byte{byte(i)}) {
					errc <- fmt.Errorf("read %d: %q %v", i, d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestWatches(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	other := e.connect()
	defer other.Close()
	ctx := e.ctx
	p := e.base + "/w"
	// exists on a missing node, twice: both registrants get NodeCreated.
	_, ok, w1, err := c.ExistsW(ctx, p)
	if err != nil || ok || w1 == nil {
		t.Fatalf("existsW: %v %v %v", ok, w1, err)
	}
	_, _, w2, _ := c.ExistsW(ctx, p)
	other.Create(ctx, p, []byte("a"), zkclient.Persistent, all)
	for _, w := range []*zkclient.Watch{w1, w2} {
		ev, ok := recv(t, w, 5*time.Second)
		if !ok || ev.Type != zkclient.EventNodeCreated || ev.Path != p {
			t.Fatalf("exists watch: %+v %v", ev, ok)
		}
	}
	// getData: data change; children: a child; both on one node.
	_, _, wd, err := c.GetW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, wc, err := c.ChildrenW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	other.Set(ctx, p, []byte("b"), -1)
	if ev, ok := recv(t, wd, 5*time.Second); !ok || ev.Type != zkclient.EventNodeDataChanged {
		t.Fatalf("data watch: %+v", ev)
	}
	select {
	case ev := <-wc.Event():
		t.Fatalf("child watch fired on a data change: %+v", ev)
	default:
	}
	other.Create(ctx, p+"/c", nil, zkclient.Persistent, all)
	if ev, ok := recv(t, wc, 5*time.Second); !ok || ev.Type != zkclient.EventNodeChildrenChanged || ev.Path != p {
		t.Fatalf("child watch: %+v", ev)
	}
	// getData on a missing node sets no watch.
	if _, _, w, err := c.GetW(ctx, p+"/none"); !errors.Is(err, zkclient.ErrNoNode) || w != nil {
		t.Fatalf("getW missing: %v %v", w, err)
	}
	// Removing a watch removes it on the server once nobody else needs it.
	_, _, wa, _ := c.GetW(ctx, p+"/c")
	_, _, wb, _ := c.GetW(ctx, p+"/c")
	if err := wa.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckWatches(ctx, p+"/c", zkclient.WatcherData); err != nil {
		t.Fatalf("watch of the second registrant gone: %v", err)
	}
	if err := wb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckWatches(ctx, p+"/c", zkclient.WatcherData); !errors.Is(err, zkclient.ErrNoWatcher) {
		t.Fatalf("watch left on the server: %v", err)
	}
	other.Set(ctx, p+"/c", []byte("x"), -1)
	if _, ok := recv(t, wa, 300*time.Millisecond); ok {
		t.Fatal("removed watch fired")
	}
}

// A getData whose caller gave up leaves no watch on the server.
func TestAbandonedWatchRemoved(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	p := e.base + "/a"
	c.Create(e.ctx, p, nil, zkclient.Persistent, all)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, _, w, err := c.GetW(ctx, p); !errors.Is(err, context.Canceled) || w != nil {
		t.Fatalf("cancelled getW: %v %v", w, err)
	}
	// The reply has come by the time a later request is answered.
	if err := c.Sync(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	c.Sync(e.ctx, p)
	if err := c.CheckWatches(e.ctx, p, zkclient.WatcherAny); !errors.Is(err, zkclient.ErrNoWatcher) {
		t.Fatalf("abandoned watch left on the server: %v", err)
	}
}

func TestPersistentRecursiveWatch(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	other := e.connect()
	defer other.Close()
	ctx := e.ctx
	root := e.base + "/r"
	w, err := c.AddWatch(ctx, root, true)
	if err != nil {
		t.Fatal(err)
	}
	other.Create(ctx, root, nil, zkclient.Persistent, all)
	for i := range 20 {
		other.Create(ctx, fmt.Sprintf("%s/%d", root, i), nil, zkclient.Persistent, all)
		other.Set(ctx, fmt.Sprintf("%s/%d", root, i), []byte("x"), -1)
	}
	other.Delete(ctx, root+"/0", -1)
	// Read slowly: nothing is dropped, and order is the server's.
	time.Sleep(200 * time.Millisecond)
	want := []string{"NodeCreated " + root}
	for i := range 20 {
		want = append(want, fmt.Sprintf("NodeCreated %s/%d", root, i), fmt.Sprintf("NodeDataChanged %s/%d", root, i))
	}
	want = append(want, "NodeDeleted "+root+"/0")
	for i, wnt := range want {
		ev, err := w.Next(ctx)
		if err != nil || fmt.Sprintf("%v %s", ev.Type, ev.Path) != wnt {
			t.Fatalf("event %d: %v %s (%v), want %s", i, ev.Type, ev.Path, err, wnt)
		}
	}
	if err := w.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Next(ctx); ev.Type != zkclient.EventNotWatching || !errors.Is(err, nil) {
		t.Fatalf("after remove: %+v %v", ev, err)
	}
	if _, err := w.Next(ctx); !errors.Is(err, zkclient.ErrWatchRemoved) {
		t.Fatalf("after remove: %v", err)
	}
}

// A watch set before the connection drops fires after the reconnection
// for a change made meanwhile (setWatches2 with the last zxid seen).
func TestWatchRestoredAfterReconnect(t *testing.T) {
	e := newEnv(t)
	c, px := e.connectProxied()
	other := e.connect()
	defer other.Close()
	ctx := e.ctx
	p := e.base + "/x"
	other.Create(ctx, p, nil, zkclient.Persistent, all)
	other.Create(ctx, p+"/kid", nil, zkclient.Persistent, all)
	_, _, w, err := c.GetW(ctx, p+"/kid")
	if err != nil {
		t.Fatal(err)
	}
	_, _, wk, _ := c.ChildrenW(ctx, p)
	pw, _ := c.AddWatch(ctx, p, false)
	states := c.States()
	defer states.Close()
	px.Refuse(true)
	px.Cut()
	waitState(t, states, zkclient.StateSuspended)
	other.Delete(ctx, p+"/kid", -1)
	px.Refuse(false)
	waitState(t, states, zkclient.StateReconnected)
	if ev, ok := recv(t, w, 5*time.Second); !ok || ev.Type != zkclient.EventNodeDeleted || ev.Path != p+"/kid" {
		t.Fatalf("data watch after reconnect: %+v %v", ev, ok)
	}
	if ev, ok := recv(t, wk, 5*time.Second); !ok || ev.Type != zkclient.EventNodeChildrenChanged {
		t.Fatalf("child watch after reconnect: %+v %v", ev, ok)
	}
	// The persistent watch is back: a later change reaches it.
	other.Set(ctx, p, []byte("later"), -1)
	for {
		ev, err := pw.Next(ctx)
		if err != nil {
			t.Fatalf("persistent watch after reconnect: %v", err)
		}
		if ev.Type == zkclient.EventNodeDataChanged {
			break
		}
		if ev.Type != zkclient.EventNodeChildrenChanged {
			t.Fatalf("persistent watch after reconnect: %+v", ev)
		}
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	ctx := e.ctx
	states := c.States()
	p := e.base + "/eph"
	c.Create(ctx, p, nil, zkclient.Ephemeral, all)
	_, _, w, _ := c.GetW(ctx, p)
	pw, _ := c.AddWatch(ctx, e.base, true)
	id, pass := c.Credentials()
	if err := zktest.ExpireSession(ctx, e.addr, id, pass); err != nil {
		t.Fatal(err)
	}
	waitState(t, states, zkclient.StateExpired)
	if _, err := states.Next(ctx); !errors.Is(err, zkclient.ErrSessionExpired) {
		t.Fatalf("stream after expiry: %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), zkclient.ErrSessionExpired) {
		t.Fatalf("Err: %v", c.Err())
	}
	if _, _, err := c.Get(ctx, e.base); !errors.Is(err, zkclient.ErrSessionExpired) {
		t.Fatalf("call after expiry: %v", err)
	}
	ev, ok := recv(t, w, time.Second)
	if !ok || (ev.Type != zkclient.EventNotWatching && ev.Type != zkclient.EventNodeDeleted) {
		t.Fatalf("watch after expiry: %+v %v", ev, ok)
	}
	for {
		ev, err := pw.Next(ctx)
		if err != nil {
			if !errors.Is(err, zkclient.ErrSessionExpired) {
				t.Fatalf("persistent watch ended with %v", err)
			}
			break
		}
		_ = ev
	}
	if got := c.SessionID(); got != id {
		t.Fatalf("a new session was opened: 0x%x", got)
	}
}

// A cancelled call returns at once; its late reply is discarded and the
// requests after it are still matched to their replies.
func TestCancelledCallLateReply(t *testing.T) {
	e := newEnv(t)
	c, px := e.connectProxied()
	c.Create(e.ctx, e.base+"/a", []byte("A"), zkclient.Persistent, all)
	// The reply is delayed longer than the call may take to return.
	delay := zktest.Bound(time.Second)
	px.Delay(delay)
	ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
	t0 := time.Now()
	_, _, err := c.Get(ctx, e.base+"/a")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > delay-50*time.Millisecond {
		t.Fatalf("cancelled get: %v after %v", err, time.Since(t0))
	}
	px.Pass()
	for i := range 5 {
		d, _, err := c.Get(e.ctx, e.base+"/a")
		if err != nil || string(d) != "A" {
			t.Fatalf("get %d after a cancelled one: %q %v", i, d, err)
		}
	}
}

func TestChroot(t *testing.T) {
	e := newEnv(t)
	root := e.connect()
	defer root.Close()
	c, err := zkclient.Connect(e.ctx, []string{e.addr + e.base})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := e.ctx
	c1, err := c.Create(ctx, "/s-", nil, zkclient.PersistentSequential, all)
	if err != nil || c1.Path != "/s-0000000000" {
		t.Fatalf("create under chroot: %q %v", c1.Path, err)
	}
	if _, _, err := root.Get(ctx, e.base+"/s-0000000000"); err != nil {
		t.Fatalf("not under the chroot: %v", err)
	}
	kids, _, _ := c.Children(ctx, "/")
	if !slices.Equal(kids, []string{"s-0000000000"}) {
		t.Fatalf("children of chroot: %v", kids)
	}
	_, _, w, _ := c.GetW(ctx, "/s-0000000000")
	pw, _ := c.AddWatch(ctx, "/", true)
	root.Delete(ctx, e.base+"/s-0000000000", -1)
	if ev, _ := recv(t, w, 5*time.Second); ev.Path != "/s-0000000000" {
		t.Fatalf("event path: %+v", ev)
	}
	if ev, _ := pw.Next(ctx); ev.Path != "/s-0000000000" {
		t.Fatalf("recursive event path: %+v", ev)
	}
	if res, err := c.Multi(ctx, c.CreateOp("/m", nil, zkclient.Persistent, all)); err != nil || res[0].Path != "/m" {
		t.Fatalf("multi under chroot: %+v %v", res, err)
	}
	if _, err := zkclient.Connect(ctx, []string{e.addr + "/a"}, zkclient.WithChroot("/b")); err == nil {
		t.Fatal("two chroots accepted")
	}
}

func TestDigestAuth(t *testing.T) {
	e := newEnv(t)
	c, px := e.connectProxied(zkclient.WithDigestAuth("alice", "secret"))
	ctx := e.ctx
	p := e.base + "/private"
	if _, err := c.Create(ctx, p, []byte("x"), zkclient.Persistent, zkclient.AuthACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	who, err := c.WhoAmI(ctx)
	if err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "digest", User: "alice"}) {
		t.Fatalf("whoAmI: %+v %v", who, err)
	}
	anon := e.connect()
	defer anon.Close()
	if _, _, err := anon.Get(ctx, p); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("anonymous read: %v", err)
	}
	if err := anon.AddAuth(ctx, "digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := anon.Get(ctx, p); err != nil {
		t.Fatalf("read after AddAuth: %v", err)
	}
	// Credentials are sent again after a reconnection.
	states := c.States()
	defer states.Close()
	px.Cut()
	waitState(t, states, zkclient.StateReconnected)
	if _, _, err := c.Get(ctx, p); err != nil {
		t.Fatalf("read after reconnect: %v", err)
	}
}

func TestCloseOnDeadLink(t *testing.T) {
	e := newEnv(t)
	px := e.proxy()
	c := e.connectTo(px.Addr(), zkclient.WithCloseTimeout(300*time.Millisecond))
	px.Blackhole()
	t0 := time.Now()
	err := c.Close()
	if !errors.Is(err, zkclient.ErrCloseUnconfirmed) || time.Since(t0) > zktest.Bound(2*time.Second) {
		t.Fatalf("close on a dead link: %v after %v", err, time.Since(t0))
	}
	if c.Close() != nil {
		t.Fatal("second close")
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	_, err := c.Create(e.ctx, e.base+"/big", make([]byte, 2<<20), zkclient.Persistent, all)
	if !errors.Is(err, zkclient.ErrTooLarge) {
		t.Fatalf("2 MiB create: %v", err)
	}
	if _, err := c.Create(e.ctx, e.base+"/small", []byte("x"), zkclient.Persistent, all); err != nil {
		t.Fatalf("after a refused request: %v", err)
	}
}

// Confirmed follows the send time of answered requests and pings: idle, it
// stays within a third of the timeout (the ping interval) plus a round trip;
// over a link that delays each way by d, it lags at least 2d behind.
//
// The session timeout scales with the slack (zktest.Bound): a client that
// stopped confirming while idle would be 2/3 of the timeout old when
// checked, more than the third plus the slack allowed.
func TestConfirmed(t *testing.T) {
	e := newEnv(t)
	c, px := e.connectProxied(zkclient.WithSessionTimeout(zktest.Bound(3 * time.Second)))
	slack := zktest.Bound(500 * time.Millisecond)
	if c.Timeout()/3 < slack {
		t.Fatalf("negotiated timeout %v: too short to tell a third of it from the slack %v", c.Timeout(), slack)
	}
	time.Sleep(2 * c.Timeout() / 3) // idle, on purpose: only pings confirm
	if age := time.Since(c.Confirmed()); age > c.Timeout()/3+slack {
		t.Fatalf("idle: confirmed %v ago, with pings every %v", age, c.Timeout()/3)
	}
	const delay = 400 * time.Millisecond
	px.Delay(delay)
	ctx, cancel := context.WithTimeout(e.ctx, zktest.Bound(5*time.Second))
	defer cancel()
	t0 := time.Now()
	if _, _, err := c.Get(ctx, e.base); err != nil {
		t.Fatal(err)
	}
	// Both bounds are lower bounds, which a paused process only widens:
	// the confirmation is this Get's (or a later ping's) send time, not an
	// older one, and not the time its answer came, 2*delay later.
	got := c.Confirmed()
	if got.Before(t0) {
		t.Fatalf("confirmed %v before the Get was sent, over a slow link", t0.Sub(got))
	}
	if age := time.Since(got); age < 2*delay-100*time.Millisecond {
		t.Fatalf("confirmed only %v ago over a link of %v round trip", age, 2*delay)
	}
}

// A request that fails with a connection loss finds the client already
// suspended: a caller that then waits for the connection (to send again)
// waits for a new one instead of sending into the dead one.
func TestSuspendedBeforeLossReported(t *testing.T) {
	e := newEnv(t)
	c, px := e.connectProxied()
	p := e.base + "/n"
	if _, err := c.Create(e.ctx, p, nil, zkclient.Persistent, all); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		px.CutOnRequest(4, false) // getData, dropped
		_, _, err := c.Get(e.ctx, p)
		if !errors.Is(err, zkclient.ErrConnectionLoss) {
			t.Fatalf("round %d: Get through a cut = %v, want ErrConnectionLoss", i, err)
		}
		if st := c.State(); st.Live() {
			t.Fatalf("round %d: state %v when the loss was reported, want suspended", i, st)
		}
		if err := c.WaitConnected(e.ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Get(e.ctx, p); err != nil {
			t.Fatalf("round %d: Get after WaitConnected: %v", i, err)
		}
	}
}

// TestEndedContextSendsNothing: a blocking call whose context has already
// ended returns the context's error and sends nothing (a create made
// nothing, however fast the server would have answered).
func TestEndedContextSendsNothing(t *testing.T) {
	e := newEnv(t)
	c := e.connect()
	defer c.Close()
	done, cancel := context.WithCancel(e.ctx)
	cancel()
	p := e.base + "/never"
	for i := range 50 {
		if _, err := c.Create(done, fmt.Sprintf("%s-%d", p, i), nil, zkclient.Persistent, all); !errors.Is(err, context.Canceled) {
			t.Fatalf("create %d with an ended context: %v", i, err)
		}
	}
	if _, _, _, err := c.GetW(done, e.base); !errors.Is(err, context.Canceled) {
		t.Errorf("GetW with an ended context: %v", err)
	}
	if _, err := c.Multi(done, c.CreateOp(p, nil, zkclient.Persistent, all)); !errors.Is(err, context.Canceled) {
		t.Errorf("Multi with an ended context: %v", err)
	}
	names, _, err := c.Children(e.ctx, e.base)
	if err != nil || len(names) != 0 {
		t.Errorf("children of %s after the calls: %v %v", e.base, names, err)
	}
}

// TestSilentConnectAttempt: an attempt to reach a server that accepts the
// connection and never answers the handshake (ZooKeeper 3.8 does so to a
// connection that arrives while it starts, ZOOKEEPER-5051) is given up
// after a third of the session timeout, so a client of a single server
// resumes its session on the next attempt instead of waiting on that one
// until the session has expired.
func TestSilentConnectAttempt(t *testing.T) {
	e := newEnv(t)
	px := e.proxy()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			nc, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, nc)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range held {
			nc.Close()
		}
	})
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 2 { // the first attempt after the cut below
			addr = silent.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c := e.connectTo(px.Addr(), zkclient.WithDialer(dial))
	defer c.Close()
	id := c.SessionID()
	states := c.States()
	px.Cut()
	<-accepted
	ev := waitState(t, states, zkclient.StateReconnected)
	if c.SessionID() != id {
		t.Fatalf("session 0x%x after the silent attempt, was 0x%x", c.SessionID(), id)
	}
	if _, _, err := c.Get(e.ctx, e.base); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed %v after the cut, in %d attempts", ev, dials.Load()-1)
}
