package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// TestBarrier: Wait passes an unset barrier at once, holds every waiter
// while it is set, and lets them all through when it is removed; a
// cancelled Wait leaves nothing.
func TestBarrier(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/gate"
	ctx := ctxTimeout(t, time.Minute)
	b := zkrecipes.NewBarrier(e.session(), path)
	must(t, b.Wait(ctx), "Wait on an unset barrier")
	must(t, b.Remove(ctx), "Remove of an unset barrier")
	must(t, b.Set(ctx), "Set")
	must(t, b.Set(ctx), "Set again")

	const waiters = 5
	var removed atomic.Bool
	base := e.watches()
	done := make([]<-chan error, waiters)
	for i := range done {
		w := zkrecipes.NewBarrier(e.session(), path)
		done[i] = async(func() error {
			err := w.Wait(ctx)
			if err == nil && !removed.Load() {
				return errors.New("passed while the barrier was set")
			}
			return err
		})
	}
	e.waitFor("waiters to watch", func() bool { return e.watches() >= base+waiters })
	for i := range done {
		blocked(t, done[i], fmt.Sprintf("waiter %d", i))
	}
	removed.Store(true)
	must(t, b.Remove(ctx), "Remove")
	for i := range done {
		must(t, result(t, done[i], "Wait"), "waiter %d", i)
	}

	must(t, b.Set(ctx), "Set")
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := zkrecipes.NewBarrier(e.session(), path).Wait(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a set barrier = %v, want DeadlineExceeded", err)
	}
	cancel()
	if kids := e.children(e.path); !slices.Equal(kids, []string{"gate"}) {
		t.Errorf("nodes after a cancelled Wait: %v, want only the barrier", kids)
	}
	must(t, b.Remove(ctx), "Remove")
	e.empty(e.path)
}

// TestDoubleBarrier runs 3 rounds of 5 participants on one path: nobody
// passes Enter before the fifth arrived, nobody passes Leave before the
// fifth left, and each round leaves nothing for the next.
func TestDoubleBarrier(t *testing.T) {
	e := newEnv(t)
	const n = 5
	path := e.path + "/double"
	ctx := ctxTimeout(t, time.Minute)
	bs := make([]*zkrecipes.DoubleBarrier, n)
	for i := range bs {
		bs[i] = zkrecipes.NewDoubleBarrier(e.session(), path, n)
	}
	members := func() int {
		return len(slices.DeleteFunc(e.children(path), func(k string) bool { return k == "ready" }))
	}
	for round := range 3 {
		var arrived, leaving atomic.Int32
		phase := func(i int, count *atomic.Int32, f func(context.Context) error, what string) <-chan error {
			count.Add(1)
			return async(func() error {
				err := f(ctx)
				if err == nil && count.Load() < n {
					return fmt.Errorf("%s returned when only %d of %d had called it", what, count.Load(), n)
				}
				return err
			})
		}
		done := make([]<-chan error, n)
		for i := range n - 1 {
			done[i] = phase(i, &arrived, bs[i].Enter, "Enter")
		}
		e.waitFor("4 participants to arrive", func() bool { return members() == n-1 })
		for i := range n - 1 {
			blocked(t, done[i], fmt.Sprintf("round %d: Enter of participant %d", round, i))
		}
		done[n-1] = phase(n-1, &arrived, bs[n-1].Enter, "Enter")
		for i := range n {
			must(t, result(t, done[i], "Enter"), "round %d: participant %d: Enter", round, i)
		}

		for i := range n - 1 {
			done[i] = phase(i, &leaving, bs[i].Leave, "Leave")
		}
		// The leavers settle: the lowest waits for the highest, the others
		// have gone and wait for the lowest.
		e.waitFor("4 participants to leave", func() bool { return members() <= 2 })
		for i := range n - 1 {
			blocked(t, done[i], fmt.Sprintf("round %d: Leave of participant %d", round, i))
		}
		done[n-1] = phase(n-1, &leaving, bs[n-1].Leave, "Leave")
		for i := range n {
			must(t, result(t, done[i], "Leave"), "round %d: participant %d: Leave", round, i)
		}
		e.empty(path)
	}
}

// TestDoubleBarrierCancel: a participant that gives up, entering or
// leaving, leaves no node.
func TestDoubleBarrierCancel(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/double"
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()

	t.Run("enter", func(t *testing.T) {
		actx, acancel := context.WithCancel(ctx)
		bctx, bcancel := context.WithCancel(ctx)
		a, b := zkrecipes.NewDoubleBarrier(s, path, 3), zkrecipes.NewDoubleBarrier(e.session(), path, 3)
		adone := async(func() error { return a.Enter(actx) })
		bdone := async(func() error { return b.Enter(bctx) })
		e.waitFor("both to arrive", func() bool { return len(e.children(path)) == 2 })
		acancel()
		if err := result(t, adone, "a Enter"); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Enter = %v, want Canceled", err)
		}
		if kids := e.children(path); len(kids) != 1 {
			t.Errorf("after a gave up: %v, want b's node only", kids)
		}
		bcancel()
		if err := result(t, bdone, "b Enter"); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Enter = %v, want Canceled", err)
		}
		e.empty(path)
		if err := a.Leave(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
			t.Errorf("Leave without Enter = %v, want ErrNotHeld", err)
		}
	})
	t.Run("enter cancelled at once", func(t *testing.T) {
		for range 20 {
			cctx, cancel := context.WithCancel(ctx)
			go cancel()
			zkrecipes.NewDoubleBarrier(s, path, 2).Enter(cctx)
			if kids := e.children(path); len(kids) != 0 {
				t.Fatalf("after a cancelled Enter: %v", kids)
			}
		}
	})
	t.Run("leave", func(t *testing.T) {
		a, b := zkrecipes.NewDoubleBarrier(s, path, 2), zkrecipes.NewDoubleBarrier(e.session(), path, 2)
		bdone := async(func() error { return b.Enter(ctx) })
		must(t, a.Enter(ctx), "a: Enter")
		must(t, result(t, bdone, "b Enter"), "b: Enter")
		if err := a.Enter(ctx); !errors.Is(err, zkrecipes.ErrBusy) {
			t.Errorf("second Enter = %v, want ErrBusy", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if err := a.Leave(tctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Leave while b stays = %v, want DeadlineExceeded", err)
		}
		cancel()
		if kids := e.children(path); len(kids) != 1 {
			t.Errorf("after a gave up leaving: %v, want b's node only", kids)
		}
		must(t, b.Leave(ctx), "b: Leave")
		e.empty(path)
	})
	if err := zkrecipes.NewDoubleBarrier(s, path, 0).Enter(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Enter with n=0 = %v, want ErrInvalidArgument", err)
	}
}

// TestDoubleBarrierInterop passes one double barrier for four participants
// with two Curator DistributedDoubleBarrier processes and two zkrecipes
// participants: nobody is let in before all four arrived, nobody is let out
// before all four started leaving, and nothing is left behind. Either side
// arrives last (and so opens the barrier for the other).
func TestDoubleBarrierInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	const n = 4
	for _, last := range []string{"zkrecipes", "curator"} {
		t.Run(last+"-last", func(t *testing.T) {
			path := e.path + "/double-barrier-" + last
			marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
			var cmds []*exec.Cmd
			for i := range 2 {
				cmds = append(cmds, curator(ctx, argv(t, interop.Args{
					Connect: strings.Join(e.servers, ","), Path: path, Recipe: "double-barrier", Members: n,
					Count: 1, Hold: 300 * time.Millisecond, Marker: marker, ID: fmt.Sprintf("curator-%d", i), StartFile: start,
				})...))
			}
			procs := startReady(t, cmds...)
			arrived := func(k int) func() bool {
				return func() bool { return len(e.children(path)) >= k }
			}

			marks := func(glob string) int {
				m, _ := filepath.Glob(filepath.Join(marker, glob)) // the pattern is well-formed
				return len(m)
			}
			var wg sync.WaitGroup
			goFirst := make(chan struct{})
			for i := range 2 {
				b := zkrecipes.NewDoubleBarrier(e.session(), path, n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-goFirst
					time.Sleep(time.Duration(i) * 150 * time.Millisecond) // one after the other
					id := fmt.Sprintf("zkrecipes-%d", i)
					check(t, os.WriteFile(filepath.Join(marker, "arrived-"+id), nil, 0o644), "%s: mark", id)
					if !check(t, b.Enter(ctx), "%s: Enter", id) {
						return
					}
					if got := marks("arrived-*"); got < n {
						t.Errorf("VIOLATION: %s entered with %d of %d participants arrived", id, got, n)
					}
					time.Sleep(300 * time.Millisecond)
					check(t, os.WriteFile(filepath.Join(marker, "leaving-"+id), nil, 0o644), "%s: mark", id)
					if !check(t, b.Leave(ctx), "%s: Leave", id) {
						return
					}
					if got := marks("leaving-*"); got < n {
						t.Errorf("VIOLATION: %s left with %d of %d participants leaving", id, got, n)
					}
				}()
			}
			if last == "zkrecipes" {
				must(t, os.WriteFile(start, nil, 0o644), "start barrier")
				e.waitFor("the Curator participants to arrive", arrived(2))
				close(goFirst)
			} else {
				close(goFirst)
				e.waitFor("the zkrecipes participants to arrive", arrived(2))
				time.Sleep(100 * time.Millisecond) // let them list the two of them and wait
				must(t, os.WriteFile(start, nil, 0o644), "start barrier")
			}
			wg.Wait()
			for i, p := range procs {
				p.waitLine(t, fmt.Sprintf("DONE curator-%d", i))
				p.wait(t)
			}
			e.empty(path)
		})
	}
}

// TestBarrierInterop sets a barrier from one side and waits on it from the
// other, both ways round, with Curator's DistributedBarrier: the waiter
// finds the gate set and stays held (its watch is on the server) until the
// gate is removed, then passes.
func TestBarrierInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	args := func(recipe, path, stop string) []string {
		return argv(t, interop.Args{
			Connect: strings.Join(e.servers, ","), Path: path, Recipe: recipe,
			Marker: t.TempDir(), ID: "curator", StopFile: stop,
		})
	}

	t.Run("zkrecipes-gate", func(t *testing.T) {
		path := e.path + "/barrier-zkrecipes-gate"
		b := zkrecipes.NewBarrier(e.session(), path)
		must(t, b.Set(ctx), "Set")
		base := e.watches()
		p := startReady(t, curator(ctx, args("barrier", path, "")...))[0]
		p.waitLine(t, "WAITING curator") // it found our barrier set
		e.waitFor("Curator to watch the barrier", func() bool { return e.watches() > base })
		if p.printed("PASSED curator") {
			t.Fatal("Curator passed a barrier that is set")
		}
		must(t, b.Remove(ctx), "Remove")
		p.waitLine(t, "PASSED curator")
		p.wait(t)
		e.empty(path)
	})

	t.Run("curator-gate", func(t *testing.T) {
		path := e.path + "/barrier-curator-gate"
		stop := filepath.Join(t.TempDir(), "stop")
		p := startReady(t, curator(ctx, args("barrier-gate", path, stop)...))[0]
		p.waitLine(t, "SET curator")
		base := e.watches()
		passed := make(chan error, 1)
		go func() { passed <- zkrecipes.NewBarrier(e.session(), path).Wait(ctx) }()
		e.waitFor("zkrecipes to watch the barrier", func() bool { return e.watches() > base })
		select {
		case err := <-passed:
			t.Fatalf("Wait returned %v while Curator's barrier is set", err)
		default:
		}
		must(t, os.WriteFile(stop, nil, 0o644), "stop file")
		must(t, <-passed, "Wait")
		p.waitLine(t, "DONE curator")
		p.wait(t)
		if kids := e.children(e.path); slices.Contains(kids, "barrier-curator-gate") {
			t.Errorf("Curator's barrier node is still there")
		}
	})
}
