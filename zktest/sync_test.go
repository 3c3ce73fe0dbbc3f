package zktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// TestLeaderKilledWithFollowerBehind: when the leader dies while a follower
// is behind, the other two members form a quorum again within an
// election's time, not after initLimit. The lagging member syncs with the
// new leader then; with ZooKeeper 3.8.0's DIFF sync (the missing
// transactions sent one by one), it acknowledges a logged transaction and
// NEWLEADER in a racy order, the leader takes the first for the second
// ("NEWLEADER ACK from sid ... is from a different epoch") and waits
// initLimit for a quorum that never forms, in one epoch after another. So
// members sync by snapshot (see javaArgs). Each round puts a member behind
// by pausing it while a session writes through the others.
func TestLeaderKilledWithFollowerBehind(t *testing.T) {
	checkLeaks(t)
	for round := range 3 {
		t.Run(fmt.Sprintf("round=%d", round), func(t *testing.T) {
			c := StartT(t, Options{Servers: 3})
			ctx := testContext(t)
			leader, err := c.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			behind, ahead := (leader+1)%3, (leader+2)%3
			conn := connectZK(t, c.Addr(ahead))
			acl := zkclient.WorldACL(zkclient.PermAll)
			if err := c.Pause(behind); err != nil {
				SkipOrFail(t, err)
			}
			for i := range 20 {
				if _, err := conn.Create(ctx, fmt.Sprintf("/n%d", i), nil, zkclient.Persistent, acl); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Kill(leader); err != nil {
				t.Fatal(err)
			}
			if err := c.Resume(behind); err != nil {
				t.Fatal(err)
			}
			// An election and a sync take well under a second; initLimit is
			// Bound(5s) (see config).
			start := time.Now()
			Eventually(t, 3*time.Second, "a quorum again after the leader died", func() error {
				wctx, cancel := context.WithTimeout(ctx, Bound(time.Second))
				defer cancel()
				_, err := conn.Create(wctx, "/after", nil, zkclient.Ephemeral, acl)
				return err
			})
			t.Logf("a quorum again %v after the kill", time.Since(start).Round(time.Millisecond))
		})
	}
}
