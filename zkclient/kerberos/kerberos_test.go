package kerberos_test

import (
	"context"
	"errors"
	"slices"
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
		defer states.Stop()
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
