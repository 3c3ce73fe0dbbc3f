package interop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// requireTools skips the test when a contender it needs is missing (checks
// are CuratorAvailable, KazooAvailable), or fails it in CI, as zktest does
// for a missing ZooKeeper.
func requireTools(t *testing.T, checks ...func() error) {
	t.Helper()
	for _, check := range checks {
		zktest.SkipOrFail(t, zktest.Unavailable(check()))
	}
}

// participant describes one contender process in a mix.
type participant struct {
	kazoo  bool   // kazoo instead of Curator
	recipe string // mutex, read, write, latch, semaphore
	leases int    // semaphore's leases
	id     string
	path   string // overrides the mix path when set
	stock  bool   // kazoo --node-names stock
}

// outcome is what one contender did.
type outcome struct {
	participant
	code   int
	lines  []string
	stderr string
}

func (o outcome) String() string {
	return fmt.Sprintf("%s (kazoo=%v recipe=%s) exit %d\nstdout:\n%s\nstderr:\n%s",
		o.id, o.kazoo, o.recipe, o.code, strings.Join(o.lines, "\n"), o.stderr)
}

// running is a started contender.
type running struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	ready  chan struct{} // closed when READY is printed
	done   chan struct{} // closed when stdout hits EOF

	mu    sync.Mutex
	lines []string
}

// runMix starts all participants against the same path and marker
// directory, releases them together once all have printed READY and
// returns their outcomes.
func runMix(ctx context.Context, t *testing.T, curator func(context.Context, ...string) *exec.Cmd,
	zk, path string, count int, hold time.Duration, parts []participant) []outcome {
	t.Helper()
	marker := t.TempDir()
	start := filepath.Join(t.TempDir(), "start")

	procs := make([]*running, len(parts))
	for i, p := range parts {
		a := Args{
			Connect:          zk,
			Path:             path,
			Recipe:           p.recipe,
			Leases:           p.leases,
			Count:            count,
			Hold:             hold,
			Marker:           marker,
			ID:               p.id,
			AcquireTimeout:   zktest.Bound(20 * time.Second),
			StartFile:        start,
			KazooStockNaming: p.stock,
		}
		if p.path != "" {
			a.Path = p.path
		}
		argv, err := a.Argv()
		if err != nil {
			t.Fatal(err)
		}
		r := &running{ready: make(chan struct{}), done: make(chan struct{})}
		if p.kazoo {
			r.cmd = Kazoo(ctx, argv...)
		} else {
			r.cmd = curator(ctx, argv...)
		}
		r.cmd.Stderr = &r.stderr
		stdout, err := r.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", p.id, err)
		}
		go func() {
			defer close(r.done)
			readyClosed := false
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				r.mu.Lock()
				r.lines = append(r.lines, line)
				r.mu.Unlock()
				if !readyClosed && strings.HasPrefix(line, "READY ") {
					close(r.ready)
					readyClosed = true
				}
			}
			_, _ = io.Copy(io.Discard, stdout)
		}()
		procs[i] = r
	}

	// Start barrier: wait until every contender is connected (or has exited).
	for _, r := range procs {
		select {
		case <-r.ready:
		case <-r.done:
		case <-ctx.Done():
		}
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	outs := make([]outcome, len(parts))
	for i, r := range procs {
		<-r.done
		err := r.cmd.Wait()
		code := 0
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Errorf("wait %s: %v", parts[i].id, err)
			code = -1
		}
		r.mu.Lock()
		outs[i] = outcome{participant: parts[i], code: code, lines: r.lines, stderr: r.stderr.String()}
		r.mu.Unlock()
	}
	return outs
}

// checkClean asserts that every contender completed all acquisitions
// without seeing an overlap.
func checkClean(t *testing.T, count int, outs []outcome) {
	t.Helper()
	for _, o := range outs {
		acq := 0
		ok := o.code == ExitOK
		for _, l := range o.lines {
			switch {
			case strings.HasPrefix(l, "VIOLATION"):
				ok = false
			case strings.HasPrefix(l, "ACQ "):
				acq++
			}
		}
		if len(o.lines) == 0 || o.lines[0] != "READY "+o.id ||
			o.lines[len(o.lines)-1] != "DONE "+o.id || acq != count {
			ok = false
		}
		if !ok {
			t.Errorf("contender %s did not finish cleanly (want %d ACQ lines): %s", o.id, count, o)
		}
	}
}

func TestInterop(t *testing.T) {
	requireTools(t, CuratorAvailable, KazooAvailable)
	// Each step has a bound of its own, so that a slow step on a loaded
	// machine does not leave the later ones without time.
	ctx, cancel := context.WithTimeout(t.Context(), zktest.Bound(60*time.Second))
	defer cancel()
	step := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), zktest.Bound(30*time.Second))
		t.Cleanup(cancel)
		return ctx
	}

	// Compile the Curator contender while ZooKeeper starts.
	type built struct {
		run func(context.Context, ...string) *exec.Cmd
		err error
	}
	buildDir := t.TempDir()
	buildc := make(chan built, 1)
	buildDone := make(chan struct{})
	go func() {
		defer close(buildDone)
		run, err := BuildCurator(ctx, buildDir)
		buildc <- built{run, err}
	}()
	// If start-up fails, let javac (killed via ctx) finish before buildDir
	// is removed.
	t.Cleanup(func() { <-buildDone })
	zk := zktest.StartT(t, zktest.Options{}).Addr(0)
	b := <-buildc
	if b.err != nil {
		t.Fatal(b.err)
	}
	curator := b.run
	const count, hold = 10, 5 * time.Millisecond

	// Mixes whose contenders must all finish cleanly. semaphore is Curator
	// only: kazoo's Semaphore lays its nodes out differently.
	// latch_with_kazoo: kazoo's Lock with Curator's "-latch-" node naming
	// behaves as a LeaderLatch participant.
	for _, mix := range []struct {
		name, path string
		parts      []participant
	}{
		{"mutex", "/interop/mutex", []participant{
			{recipe: "mutex", id: "curator-1"},
			{recipe: "mutex", id: "curator-2"},
			{kazoo: true, recipe: "mutex", id: "kazoo-1"},
			{kazoo: true, recipe: "mutex", id: "kazoo-2"},
		}},
		{"rwlock", "/interop/rw", []participant{
			{recipe: "write", id: "curator-w"},
			{recipe: "read", id: "curator-r1"},
			{recipe: "read", id: "curator-r2"},
			{kazoo: true, recipe: "write", id: "kazoo-w"},
			{kazoo: true, recipe: "read", id: "kazoo-r"},
		}},
		{"latch", "/interop/latch", []participant{
			{recipe: "latch", id: "curator-l1"},
			{recipe: "latch", id: "curator-l2"},
		}},
		{"semaphore", "/interop/semaphore", []participant{
			{recipe: "semaphore", leases: 2, id: "curator-s1"},
			{recipe: "semaphore", leases: 2, id: "curator-s2"},
			{recipe: "semaphore", leases: 2, id: "curator-s3"},
		}},
		{"latch_with_kazoo", "/interop/latch-mixed", []participant{
			{recipe: "latch", id: "curator-l1"},
			{recipe: "latch", id: "curator-l2"},
			{kazoo: true, recipe: "latch", id: "kazoo-l1"},
		}},
	} {
		t.Run(mix.name, func(t *testing.T) {
			checkClean(t, count, runMix(step(t), t, curator, zk, mix.path, count, hold, mix.parts))
		})
	}

	// Negative control: contenders on different paths share the marker
	// directory, so the marker protocol must report an overlap.
	t.Run("detects_overlap", func(t *testing.T) {
		outs := runMix(step(t), t, curator, zk, "", 20, 50*time.Millisecond, []participant{
			{recipe: "mutex", id: "curator-a", path: "/interop/control-a"},
			{kazoo: true, recipe: "mutex", id: "kazoo-b", path: "/interop/control-b"},
		})
		violations := 0
		for _, o := range outs {
			if o.code != ExitOK && o.code != ExitViolation {
				t.Errorf("contender %s: unexpected exit: %s", o.id, o)
			}
			if o.code == ExitViolation {
				if last := o.lines[len(o.lines)-1]; !strings.HasPrefix(last, "VIOLATION ") {
					t.Errorf("contender %s exited %d without a VIOLATION line: %s", o.id, o.code, o)
				}
				violations++
			}
		}
		if violations == 0 {
			t.Errorf("overlapping holders were not detected:\n%s\n%s", outs[0], outs[1])
		}
	})

	// The same for semaphores: one lease each on two paths, so two holders
	// at once, which the lease marks must report.
	t.Run("detects_excess_leases", func(t *testing.T) {
		outs := runMix(step(t), t, curator, zk, "", 20, 50*time.Millisecond, []participant{
			{recipe: "semaphore", leases: 1, id: "curator-a", path: "/interop/control-sa"},
			{recipe: "semaphore", leases: 1, id: "curator-b", path: "/interop/control-sb"},
		})
		violations := 0
		for _, o := range outs {
			if o.code == ExitViolation {
				violations++
			} else if o.code != ExitOK {
				t.Errorf("contender %s: unexpected exit: %s", o.id, o)
			}
		}
		if violations == 0 {
			t.Errorf("excess lease holders were not detected:\n%s\n%s", outs[0], outs[1])
		}
	})

	// A semaphore needs its number of leases, and only a semaphore has one.
	t.Run("semaphore_usage", func(t *testing.T) {
		base := []string{"--connect", zk, "--path", "/u", "--count", "1", "--hold-ms", "0", "--marker", t.TempDir(), "--id", "u"}
		for _, extra := range [][]string{
			{"--recipe", "semaphore"},
			{"--recipe", "semaphore", "--leases", "0"},
			{"--recipe", "mutex", "--leases", "2"},
		} {
			cmd := curator(step(t), append(base, extra...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != ExitFailure || len(out) != 0 || !strings.Contains(stderr.String(), "leases") {
				t.Errorf("%v: want exit %d, empty stdout and a message about --leases; got %v, stdout %q, stderr %q",
					extra, ExitFailure, err, out, stderr.String())
			}
		}
	})
}

func TestKazooStockLatchUnsupported(t *testing.T) {
	requireTools(t, KazooAvailable)
	argv, err := Args{Connect: "127.0.0.1:1", Path: "/x", Recipe: "latch", Count: 1,
		Marker: t.TempDir(), ID: "k", KazooStockNaming: true}.Argv()
	if err != nil {
		t.Fatal(err)
	}
	cmd := Kazoo(t.Context(), argv...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUnsupported || !strings.HasPrefix(string(out), "UNSUPPORTED") {
		t.Fatalf("want exit %d and UNSUPPORTED, got %v, stdout %q", ExitUnsupported, err, out)
	}
}

func TestUsageErrorsExitOne(t *testing.T) {
	requireTools(t, KazooAvailable)
	cmd := Kazoo(t.Context(), "--recipe", "nope")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFailure || len(out) != 0 || stderr.Len() == 0 {
		t.Fatalf("want exit %d, empty stdout and a message on stderr; got %v, stdout %q, stderr %q",
			ExitFailure, err, out, stderr.String())
	}
}

func TestArgv(t *testing.T) {
	got, err := Args{Connect: "h:1", Path: "/p", Recipe: "read", Count: 3, Hold: 1500 * time.Millisecond,
		Marker: "/m", ID: "x", SessionTimeout: 4 * time.Second, StartFile: "/s", Leases: 2}.Argv()
	if err != nil {
		t.Fatal(err)
	}
	want := "--connect h:1 --path /p --recipe read --count 3 --hold-ms 1500 --marker /m --id x " +
		"--session-timeout-ms 4000 --start-file /s --leases 2"
	if strings.Join(got, " ") != want {
		t.Fatalf("Argv = %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := (Args{}).Argv(); err == nil {
		t.Fatal("Argv of empty Args succeeded")
	}
}
