package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestReconfig runs one 3-member ensemble with dynamic reconfiguration
// through a membership change after another, with a client that follows
// the ensemble and holds an ephemeral node (what a lock is) throughout:
// Config reads the members and version; a client given only the first
// member's address finds the others; a member is added (a watch on the
// configuration fires, the follower's list grows); the member the client
// is connected to is removed, and the session moves to a member of the new
// configuration, with its id and its ephemeral node.
func TestReconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	zktest.SkipOrFail(t, sharedErr)
	checkLeaks(t)
	cluster := zktest.StartT(t, zktest.Options{Servers: 3, Reconfig: true})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(2*time.Minute))
	defer cancel()

	admin, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithDigestAuth(zktest.SuperUser, zktest.SuperPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cfg, err := admin.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(cfg.Servers())); !slices.Equal(got, slices.Sorted(slices.Values(cluster.Addrs()))) {
		t.Fatalf("config servers %v, cluster %v\n%s", got, cluster.Addrs(), cfg.Raw)
	}
	for _, m := range cfg.Members {
		if m.Role != "participant" || m.Client != cluster.Addr(int(m.ID-1)) {
			t.Fatalf("member %+v, want participant at %s", m, cluster.Addr(int(m.ID-1)))
		}
	}

	// Given member 0 only, the client learns the others.
	c, err := zkclient.Connect(ctx, []string{cluster.Addr(0)}, zkclient.WithFollowConfig(), zkclient.WithSessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := c.SessionID()
	zktest.Eventually(t, 10*time.Second, "the client learns the members", func() error {
		if s := c.Servers(); len(s) != 3 {
			return fmt.Errorf("servers %v", s)
		}
		return nil
	})
	lock := "/reconfig-lock-" + time.Now().Format("150405.000000000")
	// The client may be moving (learning the members moves it with
	// probability 2/3): a create in flight then fails with a connection
	// loss, and is tried again.
	zktest.Eventually(t, 10*time.Second, "the lock node is created", func() error {
		if err := c.WaitConnected(ctx); err != nil {
			return err
		}
		_, err := c.Create(ctx, lock, nil, zkclient.Ephemeral, all)
		if errors.Is(err, zkclient.ErrNodeExists) {
			return nil
		}
		return err
	})
	held := func(what string) {
		t.Helper()
		if err := c.WaitConnected(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		st, ok, err := c.Exists(ctx, lock)
		if err != nil || !ok || st.EphemeralOwner != id || c.SessionID() != id {
			t.Fatalf("%s: the ephemeral node is not held by session 0x%x: %v %v %+v", what, id, ok, err, st)
		}
	}

	t.Run("set servers", func(t *testing.T) {
		c2, err := zkclient.Connect(ctx, cluster.Addrs())
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		id2, cur := c2.SessionID(), c2.Server()
		// The same servers in another order: the client stays.
		rev := cluster.Addrs()
		slices.Reverse(rev)
		if err := c2.SetServers(rev); err != nil {
			t.Fatal(err)
		}
		if err := c2.Sync(ctx, "/"); err != nil || c2.Server() != cur {
			t.Fatalf("moved from %s to %s on the same list (%v)", cur, c2.Server(), err)
		}
		// A list without its server: the client moves, with its session.
		others := slices.DeleteFunc(cluster.Addrs(), func(a string) bool { return a == cur })
		if err := c2.SetServers(others); err != nil {
			t.Fatal(err)
		}
		zktest.Eventually(t, 10*time.Second, "the session moves off the dropped server", func() error {
			if s := c2.Server(); !slices.Contains(others, s) || c2.State() == zkclient.StateSuspended {
				return fmt.Errorf("on %s (%v)", s, c2.State())
			}
			return nil
		})
		if c2.SessionID() != id2 {
			t.Fatalf("session 0x%x became 0x%x", id2, c2.SessionID())
		}
		if err := c2.SetServers([]string{"a:1/other"}); err == nil {
			t.Fatal("SetServers accepted a new chroot")
		}
	})

	t.Run("refused", func(t *testing.T) {
		// Without the super user, and from a stale version.
		_, err := c.Reconfig(ctx, nil, []int64{3}, -1)
		if !errors.Is(err, zkclient.ErrNoAuth) {
			t.Fatalf("reconfig without rights: %v, want ErrNoAuth", err)
		}
		_, err = admin.Reconfig(ctx, nil, []int64{3}, cfg.Version+1)
		if !errors.Is(err, zkclient.ErrBadVersion) {
			t.Fatalf("reconfig from a wrong version: %v, want ErrBadVersion", err)
		}
		_, err = admin.Reconfig(ctx, []string{"server.9=127.0.0.1:1:2"}, nil, -1)
		if !errors.Is(err, zkclient.ErrBadArguments) {
			t.Fatalf("reconfig with a bad server line: %v, want ErrBadArguments", err)
		}
	})

	t.Run("add", func(t *testing.T) {
		_, w, err := admin.ConfigW(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i, err := cluster.AddMember(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next, err := zktest.Reconfig(ctx, admin, []string{cluster.ServerSpec(i)}, nil, cfg.Version)
		if err != nil {
			t.Fatal(err)
		}
		if len(next.Members) != 4 || next.Version <= cfg.Version || !slices.Contains(next.Servers(), cluster.Addr(i)) {
			t.Fatalf("after adding member %d: version %x -> %x\n%s", i, cfg.Version, next.Version, next.Raw)
		}
		select {
		case ev := <-w.Event():
			if ev.Type != zkclient.EventNodeDataChanged || ev.Path != zkclient.ConfigPath {
				t.Fatalf("config watch: %+v", ev)
			}
		case <-time.After(zktest.Bound(10 * time.Second)):
			t.Fatal("the config watch did not fire")
		}
		zktest.Eventually(t, 10*time.Second, "the follower learns the new member", func() error {
			if s := c.Servers(); !slices.Contains(s, cluster.Addr(i)) {
				return errors.New("the follower has not learnt the new member")
			}
			return nil
		})
		cfg = next
		held("after adding a member")
	})

	t.Run("remove connected", func(t *testing.T) {
		from := c.Server()
		var victim int64 = -1
		for _, m := range cfg.Members {
			if m.Client == from {
				victim = m.ID
			}
		}
		if victim < 0 {
			t.Fatalf("connected to %s, not a member of\n%s", from, cfg.Raw)
		}
		next, err := zktest.Reconfig(ctx, admin, nil, []int64{victim}, cfg.Version)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(next.Servers(), from) || len(next.Members) != 3 {
			t.Fatalf("after removing %d:\n%s", victim, next.Raw)
		}
		zktest.Eventually(t, 20*time.Second, "the session moves to a member of the new config", func() error {
			if s := c.Server(); s == from || !slices.Contains(next.Servers(), s) || c.State() == zkclient.StateSuspended {
				return errors.New("still on " + s)
			}
			return nil
		})
		held("after removing the connected member")
		if slices.Contains(c.Servers(), from) {
			t.Fatalf("the removed member is still in the list %v", c.Servers())
		}
	})
}

// TestHostNameResolvedOnReconnect connects by a host name ("localhost"),
// through a proxy that cuts the connection: each connection attempt,
// the reconnection included, hands the name to the dialer, which resolves
// it then (so a member that moved to a new address is found), and the
// client reports the server by the name it was given.
func TestHostNameResolvedOnReconnect(t *testing.T) {
	e := newEnv(t)
	px := e.proxy()
	_, port, err := net.SplitHostPort(px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	name := net.JoinHostPort("localhost", port)
	var mu sync.Mutex
	var dialed []string
	c := e.connectTo(name, zkclient.WithObserver(&zkclient.Observer{Dial: func(ev zkclient.ConnEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Err == nil {
			dialed = append(dialed, ev.Server)
		}
	}}))
	defer c.Close()
	id := c.SessionID()
	states := c.States()
	defer states.Close()
	px.Cut()
	waitState(t, states, zkclient.StateSuspended)
	waitState(t, states, zkclient.StateReconnected)
	if err := c.Sync(e.ctx, "/"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) < 2 || slices.ContainsFunc(dialed, func(s string) bool { return s != name }) {
		t.Fatalf("dialed %q, want %s at each connection", dialed, name)
	}
	if c.Server() != name || c.SessionID() != id {
		t.Fatalf("on %s with session 0x%x, want %s and 0x%x", c.Server(), c.SessionID(), name, id)
	}
}
