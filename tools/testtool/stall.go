package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A stallSetting is how long the freezes last and how far apart they
// come, each drawn uniformly from its range.
type stallSetting struct {
	pauseMin, pauseMax, gapMin, gapMax time.Duration
}

var stallSettings = map[string]stallSetting{
	"off":   {}, // no freezes: only the -timeout and the clean-up
	"mild":  {50 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second},
	"harsh": {100 * time.Millisecond, 700 * time.Millisecond, 300 * time.Millisecond, 1500 * time.Millisecond},
}

// stall runs a command and, until it ends, freezes a random part of its
// process tree (SIGSTOP), then thaws it (SIGCONT): one process (go test,
// a test binary, a JVM, a helper), one process with its descendants, or
// the whole tree. It models a starved machine at no CPU cost. Only the
// command and its descendants are signalled, and every process frozen is
// thawed before stall returns, also when it is interrupted or its
// -timeout passes (then the tree is terminated, and killed 10 s later).
// It returns the command's exit code.
func stall(args []string) (int, error) {
	fs := flag.NewFlagSet("stall", flag.ContinueOnError)
	name := fs.String("setting", "harsh", "mild (50-250ms every 0.5-2s), harsh (100-700ms every 0.3-1.5s) or off")
	logFile := fs.String("log", "", "write each freeze to this file (default: none; the count goes to stderr)")
	timeout := fs.Duration("timeout", 0, "terminate the command's tree after this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	set, ok := stallSettings[*name]
	if !ok || fs.NArg() == 0 {
		return 2, fmt.Errorf("usage: testtool stall [-setting mild|harsh|off] [-log FILE] [-timeout D] CMD [ARG...]")
	}
	log := io.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			return 2, err
		}
		defer f.Close()
		log = f
	}

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	root := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var deadline <-chan time.Time
	if *timeout > 0 {
		deadline = time.After(*timeout)
	}

	start := time.Now()
	pauses, frozenFor := 0, time.Duration(0)
	var frozen []proc
	thaw := func() {
		signalAll(frozen, syscall.SIGCONT)
		frozen = nil
	}
	// end thaws what is frozen, then terminates the tree and waits for
	// the command, killing what is left if it takes more than 10 s.
	end := func(why string) error {
		thaw()
		fmt.Fprintf(os.Stderr, "testtool stall: %s: terminating the command's process tree\n", why)
		tree := descendants(root)
		signalAll(tree, syscall.SIGCONT)
		signalAll(tree, syscall.SIGTERM)
		select {
		case err := <-done:
			signalAll(tree, syscall.SIGKILL) // children that outlived it
			return err
		case <-time.After(10 * time.Second):
			signalAll(descendants(root), syscall.SIGKILL)
			return <-done
		}
	}
	var phase <-chan time.Time // nil: never
	if set.gapMax > 0 {
		phase = time.After(between(set.gapMin, set.gapMax))
	}
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case s := <-sigs:
			waitErr = end("got " + s.String())
			break loop
		case <-deadline:
			waitErr = end(fmt.Sprintf("timeout %v passed", *timeout))
			break loop
		case <-phase:
			if frozen != nil {
				thaw()
				phase = time.After(between(set.gapMin, set.gapMax))
				continue
			}
			// A process stopped already was stopped by the test (a
			// paused ZooKeeper member, a frozen lock holder): a starved
			// machine would not wake it, so the thaw must not either.
			frozen = slices.DeleteFunc(pick(descendants(root)), func(p proc) bool { return p.state == "T" || p.state == "t" })
			pause := between(set.pauseMin, set.pauseMax)
			signalAll(frozen, syscall.SIGSTOP)
			pauses++
			frozenFor += pause
			fmt.Fprintf(log, "%8.3fs freeze %v: %s\n", time.Since(start).Seconds(), pause, describe(frozen))
			phase = time.After(pause)
		}
	}
	thaw()
	summary := fmt.Sprintf("testtool stall: %s setting, %d freezes, %v frozen in %v", *name, pauses, frozenFor.Round(time.Millisecond), time.Since(start).Round(time.Second))
	fmt.Fprintln(log, summary)
	if phaseOn := set.gapMax > 0; phaseOn {
		fmt.Fprintln(os.Stderr, summary)
	}
	if waitErr == nil {
		return 0, nil
	}
	if ee, ok := errors.AsType[*exec.ExitError](waitErr); ok {
		if code := ee.ExitCode(); code >= 0 {
			return code, nil
		}
		return 1, nil // killed by a signal
	}
	return 2, waitErr
}

// between returns a duration drawn uniformly from [lo, hi].
func between(lo, hi time.Duration) time.Duration {
	return (lo + rand.N(hi-lo+1)).Round(time.Millisecond)
}

// pick chooses what to freeze of a tree listed root first: one process,
// one process and its descendants, or the whole tree.
func pick(tree []proc) []proc {
	if len(tree) == 0 {
		return nil
	}
	switch rand.N(3) {
	case 0:
		return tree[rand.N(len(tree)):][:1]
	case 1:
		return descendantsIn(tree, tree[rand.N(len(tree))].pid)
	}
	return tree
}

// signalAll sends sig to procs, each only if it is still the same process
// (its start time unchanged): a process that has exited is left alone, and
// so is another that got its pid since.
func signalAll(procs []proc, sig syscall.Signal) {
	for _, p := range procs {
		if now, err := readProc(p.pid); err == nil && now.start == p.start {
			syscall.Kill(p.pid, sig)
		}
	}
}

// describe names procs for the log.
func describe(procs []proc) string {
	var b strings.Builder
	for i, p := range procs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d(%s)", p.pid, p.comm)
	}
	return b.String()
}

// proc is a process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	start     string // start time, in clock ticks since boot
	comm      string
	state     string // R, S, T (stopped), ...
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, err
	}
	s := string(b)
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp {
		return proc{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	// After the comm: state (field 3), ppid (4), ..., starttime (22).
	f := strings.Fields(s[rp+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, err
	}
	return proc{pid: pid, ppid: ppid, start: f[19], comm: s[lp+1 : rp], state: f[0]}, nil
}

// descendants lists root and every process descending from it, root
// first, from a scan of /proc.
func descendants(root int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var all []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			all = append(all, p)
		}
	}
	return descendantsIn(all, root)
}

// descendantsIn returns root and its descendants among procs, root first.
func descendantsIn(procs []proc, root int) []proc {
	children := map[int][]proc{}
	var out []proc
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
		if p.pid == root {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}
