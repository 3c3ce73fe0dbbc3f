package kerberos_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/kerberos"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestGSSAPI logs in to a ZooKeeper that serves Kerberos (a KDC from
// Debian's krb5-kdc on loopback, the server's JAAS Server section logging
// in its service principal from a keytab): with a password and with a
// keytab, the session is known as sasl:<principal>, a sasl ACL admits it
// and no one else, it logs in again after a cut connection, and a ticket
// for another service is refused (ErrAuthFailed), not a hang.
func TestGSSAPI(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	kdc := zktest.StartKDCT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kdc.AddUser(ctx, "bob", "bob-pw"); err != nil {
		t.Fatal(err)
	}
	aliceKeytab, err := kdc.AddKeytab(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	cluster := zktest.StartT(t, zktest.Options{Kerberos: kdc})
	cfg, err := config.Load(kdc.Config())
	if err != nil {
		t.Fatal(err)
	}
	connect := func(t *testing.T, addr string, m zkclient.SASLMechanism) *zkclient.Client {
		t.Helper()
		c, err := zkclient.Connect(ctx, []string{addr}, zkclient.WithSessionTimeout(4*time.Second), zkclient.WithSASL(m))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	bobKrb := client.NewWithPassword("bob", zktest.KDCRealm, "bob-pw", cfg, client.DisablePAFXFAST(true))
	t.Cleanup(bobKrb.Destroy)
	bob := kerberos.GSSAPI(bobKrb)
	bobID := zkclient.ClientInfo{Scheme: "sasl", User: "bob@" + zktest.KDCRealm}

	t.Run("Login", func(t *testing.T) {
		c := connect(t, cluster.Addr(0), bob)
		who, err := c.WhoAmI(ctx)
		if err != nil || !slices.Contains(who, bobID) {
			t.Fatalf("whoAmI: %+v %v", who, err)
		}
		kt, err := keytab.Load(aliceKeytab)
		if err != nil {
			t.Fatal(err)
		}
		aliceKrb := client.NewWithKeytab("alice", zktest.KDCRealm, kt, cfg, client.DisablePAFXFAST(true))
		defer aliceKrb.Destroy()
		a := connect(t, cluster.Addr(0), kerberos.GSSAPI(aliceKrb))
		if who, err := a.WhoAmI(ctx); err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "alice@" + zktest.KDCRealm}) {
			t.Fatalf("whoAmI of alice (keytab): %+v %v", who, err)
		}
	})

	t.Run("ACL", func(t *testing.T) {
		c := connect(t, cluster.Addr(0), bob)
		acl := zkclient.SASLACL(zkclient.PermAll, bobID.User)
		if _, err := c.Create(ctx, "/krb", []byte("bob's"), zkclient.Persistent, acl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Delete(context.Background(), "/krb", -1) })
		if d, _, err := c.Get(ctx, "/krb"); err != nil || string(d) != "bob's" {
			t.Fatalf("bob reads his node: %q %v", d, err)
		}
		anon, err := zkclient.Connect(ctx, cluster.Addrs())
		if err != nil {
			t.Fatal(err)
		}
		defer anon.Close()
		if _, _, err := anon.Get(ctx, "/krb"); !errors.Is(err, zkclient.ErrNoAuth) {
			t.Fatalf("an unauthenticated client reads bob's node: %v", err)
		}
	})

	t.Run("Reconnect", func(t *testing.T) {
		px := zktest.NewProxyT(t, cluster.Addr(0))
		c := connect(t, px.Addr(), bob)
		states := c.States()
		defer states.Close()
		px.Cut()
		for {
			ev, err := states.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.State == zkclient.StateReconnected {
				break
			}
		}
		if who, err := c.WhoAmI(ctx); err != nil || !slices.Contains(who, bobID) {
			t.Fatalf("whoAmI after reconnect: %+v %v", who, err)
		}
	})

	t.Run("WrongService", func(t *testing.T) {
		// A ticket for a principal the server has no key of.
		if _, err := kdc.AddKeytab(ctx, "zookeeper/elsewhere"); err != nil {
			t.Fatal(err)
		}
		_, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithSASL(kerberos.GSSAPI(bobKrb, kerberos.WithServiceHost("elsewhere"))))
		if !errors.Is(err, zkclient.ErrAuthFailed) || ctx.Err() != nil {
			t.Fatalf("a ticket for another service: %v", err)
		}
		t.Logf("%v", err)
		// No such principal at all: the KDC refuses the ticket.
		_, err = zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithSASL(kerberos.GSSAPI(bobKrb, kerberos.WithServiceHost("nowhere"))))
		if !errors.Is(err, zkclient.ErrAuthFailed) || ctx.Err() != nil {
			t.Fatalf("a ticket for an unknown service: %v", err)
		}
		t.Logf("%v", err)
	})

	t.Run("KDCDown", func(t *testing.T) {
		// A client with no ticket yet, and no KDC to ask: each attempt
		// fails, none is a refusal, and Connect gives up when its
		// context ends.
		carolKrb := client.NewWithPassword("bob", zktest.KDCRealm, "bob-pw", cfg, client.DisablePAFXFAST(true))
		defer carolKrb.Destroy()
		if err := kdc.Close(); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		_, err := zkclient.Connect(sctx, cluster.Addrs(), zkclient.WithSASL(kerberos.GSSAPI(carolKrb)))
		if !errors.Is(err, zkclient.ErrNoServer) || errors.Is(err, zkclient.ErrAuthFailed) {
			t.Fatalf("KDC down: %v", err)
		}
		t.Logf("%v", err)
	})
}

// TestGSSAPIFailover kills the member of a 3-member Kerberos ensemble
// requiring SASL that a GSSAPI session is connected to (every member has
// the service principal's key): the session goes on with its id on another
// member, where it logs in again with a ticket (the member knows it as
// bob@REALM, lets it read and write its sasl-ACL node made before, refuses
// alice), its watch set before fires for a change made after, and the
// states are Suspended then Reconnected, never AuthFailed.
func TestGSSAPIFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	kdc := zktest.StartKDCT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, u := range []string{"bob", "alice"} {
		if err := kdc.AddUser(ctx, u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	cluster := zktest.StartT(t, zktest.Options{Servers: 3, Kerberos: kdc, RequireSASL: true})
	cfg, err := config.Load(kdc.Config())
	if err != nil {
		t.Fatal(err)
	}
	login := func(user string) zkclient.Option {
		cl := client.NewWithPassword(user, zktest.KDCRealm, user+"-pw", cfg, client.DisablePAFXFAST(true))
		t.Cleanup(cl.Destroy)
		return zkclient.WithSASL(kerberos.GSSAPI(cl))
	}
	bobID := zkclient.ClientInfo{Scheme: "sasl", User: "bob@" + zktest.KDCRealm}
	var mu sync.Mutex
	var seen []zkclient.State
	c, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithSessionTimeout(6*time.Second), login("bob"),
		zkclient.WithStateCallback(func(ev zkclient.StateEvent) {
			mu.Lock()
			seen = append(seen, ev.State)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	states := c.States()
	defer states.Close()
	id := c.SessionID()
	const node = "/krb-failover"
	if _, err := c.Create(ctx, node, []byte("before"), zkclient.Persistent, zkclient.SASLACL(zkclient.PermAll, bobID.User)); err != nil {
		t.Fatal(err)
	}
	defer c.Delete(context.Background(), node, -1)
	_, _, w, err := c.GetW(ctx, node)
	if err != nil {
		t.Fatal(err)
	}

	victim := slices.Index(cluster.Addrs(), c.Server())
	if err := cluster.Kill(victim); err != nil {
		t.Fatal(err)
	}
	for _, want := range []zkclient.State{zkclient.StateSuspended, zkclient.StateReconnected} {
		for {
			ev, err := states.Next(ctx)
			if err != nil {
				t.Fatalf("waiting for %v: %v", want, err)
			}
			if ev.State == want {
				break
			}
		}
	}
	t.Logf("killed member %d (%s); session 0x%x reconnected to %s", victim, cluster.Addr(victim), id, c.Server())
	if c.Server() == cluster.Addr(victim) {
		t.Fatalf("reconnected to the killed member %s", c.Server())
	}
	if who, err := c.WhoAmI(ctx); err != nil || !slices.Contains(who, bobID) {
		t.Fatalf("whoAmI after the failover: %+v %v", who, err)
	}
	if d, _, err := c.Get(ctx, node); err != nil || string(d) != "before" {
		t.Fatalf("bob reads his node after the failover: %q %v", d, err)
	}
	if _, err := c.Set(ctx, node, []byte("after"), -1); err != nil {
		t.Fatalf("bob writes his node after the failover: %v", err)
	}
	select {
	case ev := <-w.Event():
		if ev.Type != zkclient.EventNodeDataChanged || ev.Path != node {
			t.Fatalf("watch set before the failover: %+v", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch set before the failover did not fire after it")
	}
	var alive []string
	for i, a := range cluster.Addrs() {
		if i != victim {
			alive = append(alive, a)
		}
	}
	alice, err := zkclient.Connect(ctx, alive, zkclient.WithSessionTimeout(6*time.Second), login("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if _, _, err := alice.Get(ctx, node); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("alice reads bob's node: %v", err)
	}
	if c.SessionID() != id || c.Err() != nil {
		t.Fatalf("session changed: 0x%x -> 0x%x (%v)", id, c.SessionID(), c.Err())
	}
	// Connected, then Suspended and Reconnected by turns, ending
	// Reconnected.
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	ok := len(got) >= 3 && got[0] == zkclient.StateConnected && len(got)%2 == 1
	for i := 1; ok && i < len(got); i++ {
		want := zkclient.StateSuspended
		if i%2 == 0 {
			want = zkclient.StateReconnected
		}
		ok = got[i] == want
	}
	if !ok {
		t.Fatalf("states: %v, want Connected, then Suspended and Reconnected by turns", got)
	}
}
