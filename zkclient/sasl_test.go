package zkclient_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// saslUsers are the JAAS users of the SASL tests' servers.
var saslUsers = map[string]string{"bob": "bob-secret", "alice": "alice \"quoted\" \\ secret"}

// TestSASL logs in with DIGEST-MD5 to a ZooKeeper whose JAAS Server
// section lists the users (one server for the subtests): the session is
// known as sasl:<user>, a sasl ACL admits it and refuses others, a wrong
// password or an unknown user is a refusal (ErrAuthFailed, final state
// AuthFailed) and not a hang, and after a cut connection the client logs
// in again (the server keeps authentication per connection: without a new
// exchange the node would be refused).
func TestSASL(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	checkLeaks(t)
	cluster := zktest.StartT(t, zktest.Options{SASLUsers: saslUsers})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(t *testing.T, addr string, opts ...zkclient.Option) *zkclient.Client {
		t.Helper()
		c, err := zkclient.Connect(ctx, []string{addr}, append([]zkclient.Option{zkclient.WithSessionTimeout(4 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	bob := zkclient.WithSASL(zkclient.DigestMD5("bob", "bob-secret"))

	t.Run("Login", func(t *testing.T) {
		c := connect(t, cluster.Addr(0), bob)
		who, err := c.WhoAmI(ctx)
		if err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "bob"}) {
			t.Fatalf("whoAmI: %+v %v", who, err)
		}
		// A password with quotes and a backslash, as the JAAS file
		// escapes them.
		a := connect(t, cluster.Addr(0), zkclient.WithSASL(zkclient.DigestMD5("alice", saslUsers["alice"])))
		if who, err := a.WhoAmI(ctx); err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "alice"}) {
			t.Fatalf("whoAmI of alice: %+v %v", who, err)
		}
		// SASL and digest together: both identities.
		both := connect(t, cluster.Addr(0), bob, zkclient.WithDigestAuth("carol", "pw"))
		who, err = both.WhoAmI(ctx)
		if err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "bob"}) ||
			!slices.Contains(who, zkclient.ClientInfo{Scheme: "digest", User: "carol"}) {
			t.Fatalf("whoAmI with SASL and digest: %+v %v", who, err)
		}
	})

	t.Run("ACL", func(t *testing.T) {
		c := connect(t, cluster.Addr(0), bob)
		if _, err := c.Create(ctx, "/sasl-acl", []byte("for bob"), zkclient.Persistent, zkclient.SASLACL(zkclient.PermAll, "bob")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Delete(context.Background(), "/sasl-acl", -1) })
		if d, _, err := c.Get(ctx, "/sasl-acl"); err != nil || string(d) != "for bob" {
			t.Fatalf("bob reads his node: %q %v", d, err)
		}
		if acl, _, err := c.GetACL(ctx, "/sasl-acl"); err != nil || !slices.Equal(acl, zkclient.SASLACL(zkclient.PermAll, "bob")) {
			t.Fatalf("ACL: %+v %v", acl, err)
		}
		anon := connect(t, cluster.Addr(0))
		if _, _, err := anon.Get(ctx, "/sasl-acl"); !errors.Is(err, zkclient.ErrNoAuth) {
			t.Fatalf("an unauthenticated client reads bob's node: %v", err)
		}
		alice := connect(t, cluster.Addr(0), zkclient.WithSASL(zkclient.DigestMD5("alice", saslUsers["alice"])))
		if _, _, err := alice.Get(ctx, "/sasl-acl"); !errors.Is(err, zkclient.ErrNoAuth) {
			t.Fatalf("alice reads bob's node: %v", err)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		for _, m := range []zkclient.SASLMechanism{
			zkclient.DigestMD5("bob", "wrong"),
			// (Not with the password of the last user who logged in:
			// ZooKeeper 3.8.0 lets an unknown user in with it,
			// ZOOKEEPER-4839.)
			zkclient.DigestMD5("mallory", "mallory-pw"),
		} {
			var last zkclient.State
			c, err := zkclient.Connect(ctx, []string{cluster.Addr(0)}, zkclient.WithSASL(m),
				zkclient.WithStateCallback(func(ev zkclient.StateEvent) { last = ev.State }))
			if c != nil {
				c.Close()
				t.Fatal("connected with refused credentials")
			}
			if !errors.Is(err, zkclient.ErrAuthFailed) || ctx.Err() != nil {
				t.Fatalf("refused credentials: %v", err)
			}
			if last != zkclient.StateAuthFailed {
				t.Fatalf("final state %v, want %v", last, zkclient.StateAuthFailed)
			}
			t.Logf("%v", err)
		}
	})

	t.Run("NoSASLServer", func(t *testing.T) {
		// The package's server has no JAAS file: it answers no challenge.
		_, err := zkclient.Connect(ctx, []string{shared.Addr(0)}, bob)
		if !errors.Is(err, zkclient.ErrAuthFailed) || ctx.Err() != nil {
			t.Fatalf("SASL against a server without it: %v", err)
		}
		t.Logf("%v", err)
	})

	t.Run("Reconnect", func(t *testing.T) {
		px := zktest.NewProxyT(t, cluster.Addr(0))
		c := connect(t, px.Addr(), bob)
		if _, err := c.Create(ctx, "/sasl-reconnect", []byte("x"), zkclient.Persistent, zkclient.SASLACL(zkclient.PermAll, "bob")); err != nil {
			t.Fatal(err)
		}
		defer c.Delete(context.Background(), "/sasl-reconnect", -1)
		states := c.States()
		defer states.Stop()
		id := c.SessionID()
		for range 2 {
			px.Cut()
			waitState(t, states, zkclient.StateReconnected)
			if _, _, err := c.Get(ctx, "/sasl-reconnect"); err != nil {
				t.Fatalf("read after reconnect: %v", err)
			}
		}
		if c.SessionID() != id {
			t.Fatal("a new session")
		}
	})
}

// TestSASLRequired runs against a server that requires SASL
// (sessionRequireClientSASLAuth): one that drops a connection sending
// anything before SASL completes. A session with watches and digest
// credentials survives a cut connection there (so the watches to restore
// and the credentials wait for the exchange), and a
// client without SASL gets ErrSASLRequired.
func TestSASLRequired(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	checkLeaks(t)
	cluster := zktest.StartT(t, zktest.Options{SASLUsers: saslUsers, RequireSASL: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	px := zktest.NewProxyT(t, cluster.Addr(0))
	c, err := zkclient.Connect(ctx, []string{px.Addr()}, zkclient.WithSessionTimeout(4*time.Second),
		zkclient.WithSASL(zkclient.DigestMD5("bob", "bob-secret")), zkclient.WithDigestAuth("carol", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "/watched", nil, zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.GetW(ctx, "/watched")
	if err != nil {
		t.Fatal(err)
	}
	states := c.States()
	defer states.Stop()
	px.Cut()
	waitState(t, states, zkclient.StateReconnected)
	if _, err := c.Set(ctx, "/watched", []byte("changed"), -1); err != nil {
		t.Fatalf("write after reconnect: %v", err)
	}
	if ev, ok := recv(t, w, 10*time.Second); !ok || ev.Type != zkclient.EventNodeDataChanged {
		t.Fatalf("watch after reconnect: %+v %v", ev, ok)
	}
	who, err := c.WhoAmI(ctx)
	if err != nil || !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "bob"}) ||
		!slices.Contains(who, zkclient.ClientInfo{Scheme: "digest", User: "carol"}) {
		t.Fatalf("whoAmI after reconnect: %+v %v", who, err)
	}
	if err := c.Delete(ctx, "/watched", -1); err != nil {
		t.Fatal(err)
	}

	anon, err := zkclient.Connect(ctx, []string{cluster.Addr(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, _, err := anon.Get(ctx, "/"); !errors.Is(err, zkclient.ErrSASLRequired) {
		t.Fatalf("a request without SASL: %v", err)
	}
	_, err = zkclient.Connect(ctx, []string{cluster.Addr(0)}, zkclient.WithSASL(zkclient.DigestMD5("bob", "wrong")))
	if !errors.Is(err, zkclient.ErrAuthFailed) || !errors.Is(err, zkclient.ErrSASLRequired) {
		t.Fatalf("wrong password on a server requiring SASL: %v", err)
	}
}
