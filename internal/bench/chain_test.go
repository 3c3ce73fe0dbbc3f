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
// and only data watches on nodes in the lock's directory count.
func TestWatchedCountsEveryServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for i := range 2 {
		srv := zkserver.RunT(t)
		addrs = append(addrs, srv.Addr())
		c, err := dialZkc(ctx, Config{Servers: []string{srv.Addr()}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
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
	n, err := watched(ctx, addrs, "/lock")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("nodes watched in /lock on %v = %d, want 2 (/lock/n0 on one server, /lock/n1 on the other)", addrs, n)
	}
}
