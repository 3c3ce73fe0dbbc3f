package zkserver_test

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
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
			c, _, err := zk.Connect([]string{addr}, 10e9, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			base := fmt.Sprintf("/bench-%s-%d", runNonce, b.N)
			c.Create(base, nil, 0, openACL)
			b.Run("create", func(b *testing.B) {
				for i := range b.N {
					if _, err := c.Create(fmt.Sprintf("%s/n%d", base, i), []byte("x"), 0, openACL); err != nil && err != zk.ErrNodeExists {
						b.Fatal(err)
					}
				}
			})
			b.Run("getData", func(b *testing.B) {
				for range b.N {
					if _, _, err := c.Get(base); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("setData", func(b *testing.B) {
				for range b.N {
					if _, err := c.Set(base, []byte("y"), -1); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
