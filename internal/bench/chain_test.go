package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// A chain waits until every waiter's watch is on a server; the waiters'
// sessions are spread over all the servers, so all of them are counted,
// only data watches on nodes in the lock's directory count, and the
// holder's do not.
func TestWatchingCountsEveryServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		addrs []string
		ids   []int64
	)
	for i := range 2 {
		srv := zkserver.RunT(t)
		addrs = append(addrs, srv.Addr())
		c, err := dialZkc(ctx, Config{Servers: []string{srv.Addr()}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ids = append(ids, c.SessionID())
		n := fmt.Sprintf("/lock/n%d", i)
		for _, p := range []string{"/lock", n, n + "/m", "/lockx"} {
			if _, err := c.Create(ctx, p, nil, zkclient.Persistent, zkcACL); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := c.GetW(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, _, err := c.ChildrenW(ctx, "/lock"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddWatch(ctx, "/lock", true); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		holder int64
		want   int
	}{{0, 2}, {ids[0], 1}, {ids[1], 1}} {
		n, err := watching(ctx, addrs, "/lock", tc.holder)
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.want {
			t.Errorf("watches in /lock on %v but the holder 0x%x's = %d, want %d (/lock/n0 on one server, /lock/n1 on the other)", addrs, tc.holder, n, tc.want)
		}
	}
}
