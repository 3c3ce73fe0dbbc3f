package zkserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkOps measures one client's sequential create, getData and
// setData round trips against zkserver and the shared real ZooKeeper
// (which runs with forceSync=no, as zktest configures tests).
func BenchmarkOps(b *testing.B) {
	targets := map[string]string{"zkserver": embedded.Addr()}
	if realZKErr == nil {
		targets["zookeeper"] = realZK.Addr(0)
	}
	for _, name := range []string{"zkserver", "zookeeper"} {
		addr, ok := targets[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			c, err := zkclient.Connect(ctx, []string{addr}, zkclient.WithSessionTimeout(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			base := fmt.Sprintf("/bench-%s-%d", runNonce, b.N)
			c.Create(ctx, base, nil, zkclient.Persistent, openACL)
			b.Run("create", func(b *testing.B) {
				for i := range b.N {
					if _, err := c.Create(ctx, fmt.Sprintf("%s/n%d", base, i), []byte("x"), zkclient.Persistent, openACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
						b.Fatal(err)
					}
				}
			})
			b.Run("getData", func(b *testing.B) {
				for range b.N {
					if _, _, err := c.Get(ctx, base); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("setData", func(b *testing.B) {
				for range b.N {
					if _, err := c.Set(ctx, base, []byte("y"), -1); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkWrites measures create and setData throughput of several
// concurrent clients against zkserver in memory, zkserver with a DataDir
// (every transaction synced before its reply, group commit) and a real
// ZooKeeper configured as in production (forceSync=yes), which starts
// with the benchmark. It reports ops/s.
func BenchmarkWrites(b *testing.B) {
	const clients = 16
	targets := []struct {
		name  string
		start func(b *testing.B) string
	}{
		{"zkserver-memory", func(b *testing.B) string { return zkserver.RunT(b).Addr() }},
		{"zkserver-datadir", func(b *testing.B) string {
			s := zkserver.NewServer(zkserver.Options{DataDir: b.TempDir()})
			if err := s.Start("127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s.Addr()
		}},
		{"zookeeper-forcesync", func(b *testing.B) string {
			if os.Getenv("ZKSERVER_NO_ZOOKEEPER") != "" {
				b.Skip("ZKSERVER_NO_ZOOKEEPER is set")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			zs, err := zktest.Start(ctx, zktest.Options{Production: true, Heap: "512m", RealZooKeeper: true})
			if err != nil {
				b.Skip(err)
			}
			b.Cleanup(func() { zs.Close() })
			return zs.Addr(0)
		}},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			addr := tg.start(b)
			ctx := b.Context()
			conns := make([]*zkclient.Client, clients)
			for i := range conns {
				c, err := zkclient.Connect(ctx, []string{addr}, zkclient.WithSessionTimeout(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			base := "/bench-writes"
			if _, err := conns[0].Create(ctx, base, nil, zkclient.Persistent, openACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
				b.Fatal(err)
			}
			run := func(b *testing.B, op func(c *zkclient.Client, i int64) error) {
				var next atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				b.ResetTimer()
				for _, c := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							if err := op(c, i); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.Run("create", func(b *testing.B) {
				prefix := fmt.Sprintf("%s/%d-", base, b.N)
				run(b, func(c *zkclient.Client, i int64) error {
					_, err := c.Create(ctx, fmt.Sprintf("%s%d", prefix, i), []byte("x"), zkclient.Persistent, openACL)
					return err
				})
			})
			b.Run("setData", func(b *testing.B) {
				run(b, func(c *zkclient.Client, _ int64) error {
					_, err := c.Set(ctx, base, []byte("y"), -1)
					return err
				})
			})
		})
	}
}
