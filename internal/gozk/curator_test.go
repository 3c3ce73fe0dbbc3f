package gozk_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/internal/gozk"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCuratorRun: the Curator workload of BenchmarkCurator runs its
// loop on real ZooKeeper, twice on one JVM, leaves no contender behind, and
// refuses the chain.
func TestCuratorRun(t *testing.T) {
	servers := zktest.StartT(t, zktest.Options{}).Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(2*time.Minute))
	defer cancel()
	c, err := gozk.NewCurator(ctx, t.TempDir())
	if err != nil {
		zktest.SkipOrFail(t, err)
	}
	defer c.Close()
	for _, n := range []int{1, 3} {
		cfg := bench.Config{Servers: servers, Path: "/bench/curator", Contenders: n, Acquisitions: 30}
		r, err := c.Run(ctx, "curator", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Acquisitions != 30 || r.Contenders != n || r.Elapsed <= 0 || r.PerSecond <= 0 || r.Reads != -1 {
			t.Errorf("%d contenders: %+v", n, r)
		}
	}
	conn, err := zkclient.Connect(ctx, servers)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if kids, _, err := conn.Children(ctx, "/bench/curator"); err != nil || len(kids) != 0 {
		t.Errorf("the lock's children after the runs: %v, %v; want none", kids, err)
	}
	if _, err := c.Run(ctx, "curator", bench.Config{Servers: servers, Path: "/bench/curator", Contenders: 2, Acquisitions: 2, Chain: true}); err == nil {
		t.Error("a chain was run; want an error")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
