package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
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
		defer states.Close()
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
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
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
	defer states.Close()
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

// TestSASLFailover moves a DIGEST-MD5 session across a 3-member ensemble
// that requires SASL (sessionRequireClientSASLAuth): first the follower
// it is connected to is killed, then (that member back) the leader is
// stopped. Each time the session goes on with its id on another
// connection, where it logs in again before anything else: the member
// knows it as sasl:bob and lets it read and write its sasl-ACL node made
// before the failovers (alice gets NoAuth), and the one-shot and
// persistent watches set before, restored after the login, fire for
// changes made after. The state stream shows each failover as Suspended
// then Reconnected, never AuthFailed. (A connection without the login is
// dropped by the member at the first request, the watches it restores.)
func TestSASLFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	zktest.SkipOrFail(t, sharedErr)
	checkLeaks(t)
	cluster := zktest.StartT(t, zktest.Options{Servers: 3, SASLUsers: saslUsers, RequireSASL: true})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(2*time.Minute))
	defer cancel()
	// A member starved right after the start may be electing once more:
	// the leader is the one all three serve under.
	leader := -1
	zktest.Eventually(t, 20*time.Second, "a leader all three members serve under", func() error {
		leader = -1
		for i := range 3 {
			m, err := cluster.Mode(ctx, i)
			if err != nil {
				return err
			}
			if m == "leader" {
				leader = i
			}
		}
		if leader < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	// The client starts on a follower, the other follower next.
	addrs := slices.DeleteFunc(cluster.Addrs(), func(a string) bool { return a == cluster.Addr(leader) })
	addrs = append(addrs, cluster.Addr(leader))

	bob := zkclient.WithSASL(zkclient.DigestMD5("bob", "bob-secret"))
	var mu sync.Mutex
	var seen []zkclient.StateEvent
	record := zkclient.WithStateCallback(func(ev zkclient.StateEvent) {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
	})
	c, err := zkclient.Connect(ctx, addrs, zkclient.WithoutShuffle(), zkclient.WithSessionTimeout(6*time.Second), bob, record)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	states := c.States()
	defer states.Close()
	id := c.SessionID()
	// The one-shot watches are on node, the recursive one on dir, apart:
	// each reports an event only if restored itself.
	const node, dir = "/sasl-failover", "/sasl-failover-dir"
	acl := zkclient.SASLACL(zkclient.PermAll, "bob")
	for _, p := range []string{node, dir} {
		if _, err := c.Create(ctx, p, []byte("before"), zkclient.Persistent, acl); err != nil {
			t.Fatal(err)
		}
		defer c.Delete(context.Background(), p, -1)
	}
	pw, err := c.AddWatch(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Remove(ctx)

	for round, stop := range []string{"kill", "stop"} {
		victim := slices.Index(cluster.Addrs(), c.Server())
		if stop == "stop" {
			victim = leader
		}
		_, _, w, err := c.GetW(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		data := fmt.Sprintf("after %d", round)
		child := fmt.Sprintf("%s/child%d", dir, round)
		if stop == "kill" {
			err = cluster.Kill(victim)
		} else {
			err = cluster.Stop(victim)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, states, zkclient.StateSuspended)
		ev := waitState(t, states, zkclient.StateReconnected)
		t.Logf("round %d: %s member %d (%s); session 0x%x reconnected to %s", round, stop, victim, cluster.Addr(victim), id, ev.Server)
		if ev.Server == cluster.Addr(victim) {
			t.Fatalf("round %d: reconnected to the member down %s", round, ev.Server)
		}

		// The new connection logged in: the member knows the session as
		// bob and lets it at bob's node. A member that took the session
		// while the election was still settling may drop it once more:
		// the check is then made on the connection after.
		var who []zkclient.ClientInfo
		afterLoss(t, ctx, c, fmt.Sprintf("round %d: whoAmI after the failover", round), func() (err error) {
			who, err = c.WhoAmI(ctx)
			return err
		})
		if !slices.Contains(who, zkclient.ClientInfo{Scheme: "sasl", User: "bob"}) {
			t.Fatalf("round %d: whoAmI after the failover: %+v", round, who)
		}
		afterLoss(t, ctx, c, fmt.Sprintf("round %d: bob reads his node after the failover", round), func() error {
			_, _, err := c.Get(ctx, node)
			return err
		})
		// Another client changes the node: the one-shot watch restored
		// on the new member reports it.
		down := map[int]bool{victim: true}
		other := connectAny(ctx, t, cluster, down, bob)
		if _, err := other.Set(ctx, node, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
		other.Close()
		if ev, ok := recv(t, w, 20*time.Second); !ok || ev.Type != zkclient.EventNodeDataChanged || ev.Path != node {
			t.Fatalf("round %d: watch set before the failover: %+v %v", round, ev, ok)
		}
		if d, _, err := c.Get(ctx, node); err != nil || string(d) != data {
			t.Fatalf("round %d: bob reads his node after the change: %q %v", round, d, err)
		}
		// The session writes under its other node; the restored
		// recursive watch reports that.
		if _, err := c.Create(ctx, child, nil, zkclient.Persistent, acl); err != nil {
			t.Fatalf("round %d: bob writes under his node after the failover: %v", round, err)
		}
		drain(ctx, t, pw, child)
		if err := c.Delete(ctx, child, -1); err != nil {
			t.Fatalf("round %d: bob deletes under his node after the failover: %v", round, err)
		}
		// The ACL still refuses another SASL user.
		alice := connectAny(ctx, t, cluster, down, zkclient.WithSASL(zkclient.DigestMD5("alice", saslUsers["alice"])))
		_, _, errGet := alice.Get(ctx, node)
		_, errSet := alice.Set(ctx, node, []byte("alice's"), -1)
		alice.Close()
		if !errors.Is(errGet, zkclient.ErrNoAuth) || !errors.Is(errSet, zkclient.ErrNoAuth) {
			t.Fatalf("round %d: alice at bob's node: read %v, write %v", round, errGet, errSet)
		}
		if c.SessionID() != id || c.Err() != nil {
			t.Fatalf("round %d: session changed: 0x%x -> 0x%x (%v)", round, id, c.SessionID(), c.Err())
		}
		if round == 0 {
			// Back, so the leader can go with a quorum left.
			if err := cluster.Restart(ctx, victim); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Connected first, then only Suspended and Reconnected by turns,
	// ending Reconnected: each failover was a reconnection, never a
	// refused login.
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	ok := len(got) >= 5 && got[0].State == zkclient.StateConnected && len(got)%2 == 1
	for i := 1; ok && i < len(got); i++ {
		want := zkclient.StateSuspended
		if i%2 == 0 {
			want = zkclient.StateReconnected
		}
		ok = got[i].State == want
	}
	if !ok {
		t.Fatalf("states: %+v, want Connected, then Suspended and Reconnected by turns", got)
	}
}

// afterLoss calls f until it succeeds, waiting for a new connection after
// each connection loss, for up to zktest.Bound(20s); any other error fails
// the test at once.
func afterLoss(t *testing.T, ctx context.Context, c *zkclient.Client, what string, f func() error) {
	t.Helper()
	zktest.Eventually(t, 20*time.Second, what, func() error {
		err := f()
		if errors.Is(err, zkclient.ErrConnectionLoss) {
			c.WaitConnected(ctx)
			return err
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return nil
	})
}
