package zkrecipes_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		{name: "curator+kazoo+zkrecipes", curators: 2, kazoos: 2, gos: 2},
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
					m := zkrecipes.NewMutex(s, lock)
					for n := range 10 {
						must(t, m.Lock(ctx), "zkrecipes-%d: Lock", i)
						if err := markExclusive(marker); err != nil {
							t.Errorf("zkrecipes-%d round %d: %v", i, n, err)
						}
						time.Sleep(5 * time.Millisecond)
						os.Remove(filepath.Join(marker, "exclusive"))
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

// interopEnv gives an interop test its env, a context and the Curator
// contender, or skips it (fails it under CI) when Java, Curator or kazoo is
// missing.
func interopEnv(t *testing.T) (*env, context.Context, func(context.Context, ...string) *exec.Cmd) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts JVMs and Python")
	}
	e := newEnv(t)
	for _, err := range []error{interop.CuratorAvailable(), interop.KazooAvailable()} {
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	curator, err := interop.BuildCurator(ctx, t.TempDir())
	must(t, err, "build the Curator contender")
	return e, ctx, curator
}

// markExclusive claims the marker directory as an exclusive holder, as the
// interop contenders do.
func markExclusive(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "exclusive"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return errors.New("VIOLATION: another exclusive holder is inside")
	}
	if err != nil {
		return err
	}
	f.Close()
	if shared, _ := filepath.Glob(filepath.Join(dir, "shared-*")); len(shared) > 0 {
		return fmt.Errorf("VIOLATION: readers inside with an exclusive holder: %v", shared)
	}
	return nil
}

// contenderProc is a running interop contender.
type contenderProc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	stderr bytes.Buffer
	done   chan struct{}

	mu    sync.Mutex
	lines []string
	seen  int // lines before this one were matched by waitLine
}

// argv renders a contender's command line, failing the test on bad Args.
func argv(t *testing.T, a interop.Args) []string {
	t.Helper()
	argv, err := a.Argv()
	must(t, err, "contender args")
	return argv
}

// startReady starts the contenders together (their start-up overlaps) and
// waits until every one has printed READY.
func startReady(t *testing.T, cmds ...*exec.Cmd) []*contenderProc {
	t.Helper()
	procs := make([]*contenderProc, len(cmds))
	for i, cmd := range cmds {
		procs[i] = startContender(t, cmd)
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	return procs
}

// printed reports whether the contender has printed line so far.
func (p *contenderProc) printed(line string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.lines, line)
}

func startContender(t *testing.T, cmd *exec.Cmd) *contenderProc {
	t.Helper()
	p := &contenderProc{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	out, err := cmd.StdoutPipe()
	must(t, err, "stdout pipe")
	must(t, cmd.Start(), "start %s", cmd.Path)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "READY ") {
				close(p.ready)
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

func (p *contenderProc) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-p.ready:
	case <-p.done:
		p.cmd.Wait()
		t.Fatalf("contender exited before READY: %v\nstderr: %s", p.cmd.ProcessState, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("contender not READY after 60s\nstderr: %s", p.stderr.String())
	}
}

// waitLine waits until the contender prints line, after the line the last
// waitLine matched, and fails the test if it exits or a minute passes first.
func (p *contenderProc) waitLine(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		p.mu.Lock()
		i := slices.Index(p.lines[p.seen:], line)
		if i >= 0 {
			p.seen += i + 1
		}
		printed := strings.Join(p.lines, "\n")
		p.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-p.done:
			p.mu.Lock()
			i = slices.Index(p.lines[p.seen:], line)
			p.mu.Unlock()
			if i < 0 {
				p.cmd.Wait()
				t.Fatalf("contender exited (%v) without printing %q; it printed:\n%s\nstderr: %s", p.cmd.ProcessState, line, printed, p.stderr.String())
			}
		case <-deadline:
			t.Fatalf("contender did not print %q within a minute; it printed:\n%s", line, printed)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *contenderProc) wait(t *testing.T) {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	for _, l := range p.lines {
		if strings.HasPrefix(l, "VIOLATION") {
			t.Errorf("%s", l)
		}
	}
	if err != nil {
		t.Errorf("contender %v: %v\nstdout: %s\nstderr: %s", p.cmd.Args[len(p.cmd.Args)-1], err, strings.Join(p.lines, "\n"), p.stderr.String())
	}
}

// markLease marks the marker directory as one of at most n semaphore
// holders, as the interop contenders do, and returns its mark and the
// number of holders marked (its own included).
func markLease(dir string, n int, id string, round int) (string, int, error) {
	mine := filepath.Join(dir, fmt.Sprintf("lease-%s-%d", id, round))
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		return "", 0, err
	}
	holders, err := filepath.Glob(filepath.Join(dir, "lease-*"))
	if err != nil {
		return mine, 0, err
	}
	if len(holders) > n {
		return mine, len(holders), fmt.Errorf("VIOLATION: %d lease holders marked, %d permits: %v", len(holders), n, holders)
	}
	return mine, len(holders), nil
}
