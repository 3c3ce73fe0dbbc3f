package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tests run the zkr binary, built once, against one real ZooKeeper
// (tests that need a TLS, SASL or Kerberos server start their own).
var (
	zkrBin    string
	shared    *zktest.Cluster
	sharedErr error
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "zkr-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	started := make(chan struct{})
	go func() {
		defer close(started)
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
		defer cancel()
		shared, sharedErr = zktest.Start(ctx, zktest.Options{})
	}()
	zkrBin = filepath.Join(dir, "zkr")
	args := []string{"build", "-o", zkrBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	buildErr := build.Run()
	<-started
	if shared != nil {
		defer shared.Close()
	}
	if buildErr != nil {
		fmt.Fprintf(os.Stderr, "building zkr: %v\n", buildErr)
		return 1
	}
	defer stopBrowser()
	return m.Run()
}

// servers returns the shared server's address, or skips the test.
func servers(t *testing.T) string {
	t.Helper()
	zktest.SkipOrFail(t, sharedErr)
	return shared.Addr(0)
}

// testPath is a ZooKeeper path of the test's own, and of this run of it:
// with -count=N a run does not meet what an earlier one left (a node of a
// session that expires later, a persistent node).
func testPath(t *testing.T, name string) string {
	return "/zkrtest/" + regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(t.Name(), "_") +
		"-" + strconv.Itoa(runs.of(t)) + "/" + name
}

// runs numbers the runs of each test in this process, from 1.
var runs = testRuns{byT: map[*testing.T]int{}, byName: map[string]int{}}

type testRuns struct {
	mu     sync.Mutex
	byT    map[*testing.T]int
	byName map[string]int
}

// of returns the number of t's run among the runs of tests named like t.
func (r *testRuns) of(t *testing.T) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.byT[t]
	if !ok {
		r.byName[t.Name()]++
		n = r.byName[t.Name()]
		r.byT[t] = n
		t.Cleanup(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.byT, t)
		})
	}
	return n
}

// syncBuffer is a bytes.Buffer safe for a process to write while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a zkr process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	code   int
}

// start starts zkr with args, on the shared server unless args say
// otherwise. The process is killed when the test ends.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(zkrBin, args...)
	p.cmd.Env = os.Environ()
	if sharedErr == nil {
		p.cmd.Env = append(p.cmd.Env, "ZKR_SERVERS="+shared.Addr(0))
	}
	p.cmd.Env = append(p.cmd.Env, env...) // the last value of a variable wins
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting zkr: %v", err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to exit, at most [zktest.Bound](d), and
// returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	d = zktest.Bound(d)
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("zkr %q still running after %v; stderr:\n%s", p.cmd.Args[1:], d, p.stderr.String())
		return 0
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startServer starts "zkr server" with args and waits until it has printed
// its n listening addresses, one a line; it returns them.
func startServer(t *testing.T, n int, args ...string) (*proc, []string) {
	t.Helper()
	srv := start(t, nil, append([]string{"server"}, args...)...)
	what := "zkr server printed no address"
	if n > 1 {
		what += "es"
	}
	var addrs []string
	eventually(t, 10*time.Second, what, func() bool {
		addrs = strings.Fields(srv.stdout.String())
		return len(addrs) == n
	})
	return srv, addrs
}

// result is how a zkr run ended.
type result struct {
	code           int
	stdout, stderr string
}

// zkr runs zkr with args to the end (at most a minute).
func zkr(t *testing.T, args ...string) result {
	t.Helper()
	p := start(t, nil, args...)
	code := p.wait(time.Minute)
	return result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}

// oneLineError checks that stderr is one line, without a stack trace.
func oneLineError(t *testing.T, r result) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || lines[0] == "" {
		t.Errorf("stderr should be one line, got %d:\n%s", len(lines), r.stderr)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr looks like a stack trace (%q):\n%s", bad, r.stderr)
		}
	}
}

// zkrLines returns what zkr itself wrote on stderr, among what its command
// wrote there, and checks that it is one line, without a stack trace.
func zkrLines(t *testing.T, stderr string) string {
	t.Helper()
	var own []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "zkr ") || strings.HasPrefix(l, "zkr:") {
			own = append(own, l)
		}
	}
	if len(own) != 1 {
		t.Errorf("zkr should write one line on stderr, wrote %d:\n%s", len(own), stderr)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Errorf("stderr looks like a stack trace:\n%s", stderr)
	}
	return strings.Join(own, "\n")
}

// eventually polls cond until it holds, or fails the test with what once
// [zktest.Bound](d) has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	zktest.Eventually(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// waitOutput waits until the process's standard output satisfies cond,
// and fails the test with the output so far if it has not after
// [zktest.Bound](d), or if the process exits first. It is how a test waits
// for a process it started to say it is ready.
func (p *proc) waitOutput(d time.Duration, what string, cond func(out string) bool) {
	p.t.Helper()
	zktest.Eventually(p.t, d, what, func() error {
		out := p.stdout.String()
		if cond(out) {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("zkr %q exited %d; stdout %q; stderr %q", p.cmd.Args[1:], p.code, out, p.stderr.String())
		}
		return fmt.Errorf("stdout so far %q", out)
	})
}

// admin is a plain ZooKeeper client to look at the tree.
func admin(t *testing.T) *zkclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	conn, err := zkclient.Connect(ctx, []string{servers(t)}, zkclient.WithSessionTimeout(zktest.Bound(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// children lists path's children ("" list if it does not exist).
func children(t *testing.T, conn *zkclient.Client, path string) []string {
	t.Helper()
	kids, _, err := conn.Children(context.Background(), path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

// fileExists reports whether name exists.
func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// alive reports whether the process pid exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// client opens a zkclient session on addrs for the test's own checks.
func client(t *testing.T, addrs []string, opts ...zkclient.Option) *zkclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	c, err := zkclient.Connect(ctx, addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mkdirs creates path and its missing parents, path with acl and the
// parents open to all.
func mkdirs(t *testing.T, c *zkclient.Client, path string, acl []zkclient.ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	segs := strings.Split(path[1:], "/")
	for i := range segs {
		p, a := "/"+strings.Join(segs[:i+1], "/"), zkclient.WorldACL(zkclient.PermAll)
		if i == len(segs)-1 {
			a = acl
		}
		if _, err := c.Create(ctx, p, nil, zkclient.Persistent, a); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}
