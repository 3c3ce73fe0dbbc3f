package bench

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// A chain waits until every waiter's watch is on a server; the waiters'
// sessions are spread over all the servers, so all of them are counted.
func TestWatchesCountsEveryServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for range 2 {
		srv := zkserver.RunT(t)
		addrs = append(addrs, srv.Addr())
		c, err := dialZkc(ctx, Config{Servers: []string{srv.Addr()}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Create(ctx, "/n", nil, zkclient.Persistent, zkcACL); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := c.GetW(ctx, "/n"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := watches(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("watches on %v = %d, want 2 (one on each server)", addrs, n)
	}
}
