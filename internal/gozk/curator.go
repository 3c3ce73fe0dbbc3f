package gozk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/bench"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// Curator runs the lock benchmarks' contended loop on Apache Curator's
// InterProcessMutex (Debian's Curator 5.4 with the ZooKeeper 3.8 client),
// in one JVM that serves every run of a benchmark, so that its JIT
// compiler's work carries over from run to run as in a long-running
// service: interop's CuratorBench.java, compiled and started by
// [NewCurator]. Its methods are safe to call concurrently; runs take turns.
type Curator struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the JVM's answers; closed when its stdout ends
	warmed bool
	broken error // once set, every Run fails with it: the JVM is gone
	closed bool
}

// warmUp is the untimed run a Curator makes before its first measured one,
// so that its JVM's hot paths are compiled before any clock starts.
const warmUp = 2000

// NewCurator compiles the Curator workload in dir and starts its JVM, which
// runs until Close or until ctx ends. It fails, saying what to install, if
// Java or Curator's jars are missing.
func NewCurator(ctx context.Context, dir string) (*Curator, error) {
	if err := interop.CuratorAvailable(); err != nil {
		return nil, err
	}
	build, err := interop.BuildCuratorBench(ctx, dir)
	if err != nil {
		return nil, err
	}
	c := &Curator{cmd: build(ctx), lines: make(chan string)}
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		c.stdin.Close()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("gozk: starting CuratorBench: %w", err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c, nil
}

// Close ends the JVM (at the end of its input) and waits for it. Calls
// after the first do nothing.
func (c *Curator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.broken == nil {
		c.broken = errors.New("CuratorBench closed")
	}
	c.stdin.Close()
	for range c.lines {
	}
	return c.cmd.Wait()
}

// Run runs the loop as bench.Run runs zkrecipes' (cfg.Chain is not
// supported): cfg.Contenders sessions lock and unlock cfg.Path until
// cfg.Acquisitions are done. Only the loop is timed, not the sessions'
// set-up. The first Run makes an untimed run of warmUp acquisitions
// before its own. The counts of requests and events are not observed
// (-1).
func (c *Curator) Run(ctx context.Context, recipe string, cfg bench.Config) (bench.Result, error) {
	if cfg.Chain {
		return bench.Result{}, fmt.Errorf("%s: the chain is not measured on Curator", recipe)
	}
	if cfg.Contenders < 1 || cfg.Acquisitions < 1 || cfg.Path == "" || len(cfg.Servers) == 0 {
		return bench.Result{}, fmt.Errorf("%s: %d contenders, %d acquisitions, path %q, servers %v: need at least one of each", recipe, cfg.Contenders, cfg.Acquisitions, cfg.Path, cfg.Servers)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return bench.Result{}, fmt.Errorf("%s: %w", recipe, c.broken)
	}
	if !c.warmed {
		if _, _, err := c.run(ctx, cfg.Servers, cfg.Path+"-warm-up", min(cfg.Contenders, 10), warmUp, timeout); err != nil {
			return bench.Result{}, fmt.Errorf("%s: warm-up: %w", recipe, err)
		}
		c.warmed = true
	}
	n, elapsed, err := c.run(ctx, cfg.Servers, cfg.Path, cfg.Contenders, cfg.Acquisitions, timeout)
	if err != nil {
		return bench.Result{}, fmt.Errorf("%s: %w", recipe, err)
	}
	return bench.Result{
		Recipe:             recipe,
		Contenders:         cfg.Contenders,
		Acquisitions:       n,
		Elapsed:            elapsed,
		PerSecond:          float64(n) / elapsed.Seconds(),
		Handoff:            elapsed / time.Duration(n),
		Listings:           -1,
		Reads:              -1,
		Events:             -1,
		EventsPerRelease:   -1,
		ListingsPerRelease: -1,
		ServerReads:        -1, // the JVM's session set-up would be counted
		ServerWrites:       -1,
	}, nil
}

// run sends one RUN command and reads its answer. If ctx ends first, it
// kills the JVM, whose answer would otherwise be taken for the next run's.
func (c *Curator) run(ctx context.Context, servers []string, path string, contenders, acquisitions int, timeout time.Duration) (int, time.Duration, error) {
	cmd := fmt.Sprintf("RUN %s %s %d %d %d\n", strings.Join(servers, ","), path, contenders, acquisitions, timeout.Milliseconds())
	if _, err := io.WriteString(c.stdin, cmd); err != nil {
		return 0, 0, fmt.Errorf("CuratorBench: %w", err)
	}
	var line string
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.broken = errors.New("CuratorBench exited")
			return 0, 0, c.broken
		}
		line = l
	case <-ctx.Done():
		c.broken = fmt.Errorf("CuratorBench killed: a run was abandoned: %w", ctx.Err())
		c.cmd.Process.Kill()
		return 0, 0, c.broken
	}
	f := strings.Fields(line)
	if len(f) == 3 && f[0] == "RESULT" {
		n, err1 := strconv.Atoi(f[1])
		ns, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && n == acquisitions && ns > 0 {
			return n, time.Duration(ns), nil
		}
	}
	return 0, 0, fmt.Errorf("CuratorBench: %s", line)
}
