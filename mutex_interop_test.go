package zkrecipes_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// TestMutexInterop runs Curator's InterProcessMutex, kazoo's Lock and
// zkrecipes' Mutex on one path at the same time. Every contender marks a
// shared directory while it holds; any overlap is a violation.
func TestMutexInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)

	cases := []struct {
		name                  string
		curators, kazoos, gos int
		stockKazoo            bool
	}{
		// kazoo with Curator-style node names: all three see each other.
		// All zkrecipes contenders but the first hand over by grant
		// (WithGrants), among contenders that are never granted.
		{name: "curator+kazoo+zkrecipes", curators: 2, kazoos: 2, gos: 3},
		// kazoo's own names ("__lock__"): zkrecipes counts them as
		// contenders (Curator does not, so it stays out of this mix).
		{name: "stock-kazoo+zkrecipes", kazoos: 2, gos: 2, stockKazoo: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lock := e.path + "/" + c.name
			marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
			args := func(id string) []string {
				return argv(t, interop.Args{
					Connect: strings.Join(e.servers, ","), Path: lock, Recipe: "mutex",
					Count: 10, Hold: 5 * time.Millisecond, Marker: marker, ID: id,
					StartFile: start, KazooStockNaming: c.stockKazoo,
				})
			}
			var cmds []*exec.Cmd
			for i := range c.curators {
				cmds = append(cmds, curator(ctx, args(fmt.Sprintf("curator-%d", i))...))
			}
			for i := range c.kazoos {
				cmds = append(cmds, interop.Kazoo(ctx, args(fmt.Sprintf("kazoo-%d", i))...))
			}
			procs := startReady(t, cmds...)
			must(t, os.WriteFile(start, nil, 0o644), "start barrier")

			var wg sync.WaitGroup
			for i := range c.gos {
				s := e.session()
				wg.Add(1)
				go func() {
					defer wg.Done()
					var opts []zkrecipes.LockOption
					if i > 0 {
						opts = append(opts, zkrecipes.WithGrants())
					}
					m := zkrecipes.NewMutex(s, lock, opts...)
					for n := range 10 {
						must(t, m.Lock(ctx), "zkrecipes-%d: Lock", i)
						holdExclusive(t, marker, fmt.Sprintf("zkrecipes-%d", i), n)
						must(t, m.Unlock(ctx), "zkrecipes-%d: Unlock", i)
					}
				}()
			}
			wg.Wait()
			for _, p := range procs {
				p.wait(t)
			}
			e.empty(lock)
		})
	}
}
