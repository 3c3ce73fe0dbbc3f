package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestEnsembleFailover kills the member the client is connected to, then
// the leader: each time the session moves to another member with its id,
// its ephemeral node and its watches, and a watch set before the failover
// fires for a change made after it.
func TestEnsembleFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	zktest.SkipOrFail(t, sharedErr)
	cluster := zktest.StartT(t, zktest.Options{Servers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(2*time.Minute))
	defer cancel()
	c, err := zkclient.Connect(ctx, cluster.Addrs(), zkclient.WithSessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	states := c.States()
	defer states.Close()
	id := c.SessionID()
	if _, err := c.Create(ctx, "/eph", []byte("mine"), zkclient.Ephemeral, all); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/dir", nil, zkclient.Persistent, all); err != nil {
		t.Fatal(err)
	}
	pw, err := c.AddWatch(ctx, "/dir", true)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Remove(ctx)

	leader := func() int {
		i, _ := cluster.Leader(ctx)
		return i
	}
	killed := map[int]bool{}
	for round, pick := range []string{"connected", "leader"} {
		victim := slices.Index(cluster.Addrs(), c.Server())
		if pick == "leader" {
			victim = leader()
		}
		if victim < 0 {
			t.Fatalf("round %d: no %s member", round, pick)
		}
		node := "/dir/n" + string(rune('0'+round))
		// The one-shot watch is on a node outside the recursive watch, so
		// only its own restored watch can report the delete.
		solo := "/solo" + string(rune('0'+round))
		for _, p := range []string{node, solo} {
			if _, err := c.Create(ctx, p, nil, zkclient.Persistent, all); err != nil {
				t.Fatal(err)
			}
		}
		_, _, w, err := c.GetW(ctx, solo)
		if err != nil {
			t.Fatal(err)
		}
		drain(ctx, t, pw, node) // the create's event
		before := c.Server()
		if err := cluster.Kill(victim); err != nil {
			t.Fatal(err)
		}
		killed[victim] = true
		t.Logf("round %d: killed member %d (%s), connected to %s", round, victim, pick, before)
		if victim == slices.Index(cluster.Addrs(), before) {
			waitState(t, states, zkclient.StateSuspended)
			waitState(t, states, zkclient.StateReconnected)
		} else if err := c.WaitConnected(ctx); err != nil {
			t.Fatal(err)
		}
		// Writes go through once a quorum (with a leader) serves again.
		other := connectAny(ctx, t, cluster, killed)
		for _, p := range []string{node, solo} {
			for {
				err := other.Delete(ctx, p, -1)
				if err == nil {
					break
				}
				if !errors.Is(err, zkclient.ErrConnectionLoss) {
					t.Fatalf("delete %s: %v", p, err)
				}
				other.WaitConnected(ctx)
			}
		}
		other.Close()
		select {
		case ev := <-w.Event():
			if ev.Type != zkclient.EventNodeDeleted || ev.Path != solo {
				t.Fatalf("round %d: watch after failover: %+v", round, ev)
			}
		case <-time.After(zktest.Bound(20 * time.Second)):
			t.Fatalf("round %d: watch set before the failover did not fire after it", round)
		}
		// The recursive watch was restored too: it reports a change made
		// after the failover. (It may or may not report the delete:
		// ZooKeeper replays what a restored one-shot watch missed, not
		// what a persistent one missed, and the member the client was on
		// may have dropped it, when it lost the leader, before the
		// delete.)
		after := node + "-after"
		if _, err := c.Create(ctx, after, nil, zkclient.Persistent, all); err != nil {
			t.Fatal(err)
		}
		drain(ctx, t, pw, after)
		if c.SessionID() != id || c.Err() != nil {
			t.Fatalf("round %d: session changed: 0x%x -> 0x%x (%v)", round, id, c.SessionID(), c.Err())
		}
		// A member that took the session while the election was still
		// settling may drop it once more: the read is then made on the
		// connection after (as in TestSASLFailover).
		var d []byte
		var st zkclient.Stat
		afterLoss(t, ctx, c, fmt.Sprintf("round %d: ephemeral node after failover", round), func() (err error) {
			d, st, err = c.Get(ctx, "/eph")
			return err
		})
		if string(d) != "mine" || st.EphemeralOwner != id {
			t.Fatalf("round %d: ephemeral node after failover: %q %+v", round, d, st)
		}
		t.Logf("round %d: session 0x%x moved %s -> %s", round, id, before, c.Server())
		if round == 0 {
			// Bring the member back so the leader can be killed with a
			// quorum left.
			if err := cluster.Restart(ctx, victim); err != nil {
				t.Fatal(err)
			}
			delete(killed, victim)
		}
	}
}

// drain reads the persistent watch until an event for node.
func drain(ctx context.Context, t *testing.T, pw *zkclient.PersistentWatch, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, zktest.Bound(20*time.Second))
	defer cancel()
	for {
		ev, err := pw.Next(ctx)
		if err != nil {
			t.Fatalf("recursive watch: waiting for %s: %v", node, err)
		}
		if ev.Path == node {
			return
		}
	}
}

// connectAny connects to the members not killed, with opts.
func connectAny(ctx context.Context, t *testing.T, cluster *zktest.Cluster, killed map[int]bool, opts ...zkclient.Option) *zkclient.Client {
	t.Helper()
	var addrs []string
	for i, a := range cluster.Addrs() {
		if !killed[i] {
			addrs = append(addrs, a)
		}
	}
	c, err := zkclient.Connect(ctx, addrs, append([]zkclient.Option{zkclient.WithSessionTimeout(6 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
