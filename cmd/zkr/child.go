package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/term"
)

// child is the command zkr runs while it holds a lock, a leadership or a
// membership.
type child struct {
	cmd      *exec.Cmd
	ownGroup bool          // in a process group of its own, signalled as a group
	exited   chan struct{} // closed once the command has exited
	state    *os.ProcessState
}

// startChild starts argv with the extra environment env and zkr's standard
// streams. A command that cannot be started gives an error carrying the
// shell's codes: 127 not found, 126 not executable.
func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	c := &child{cmd: cmd, ownGroup: !isTerminal(stdin), exited: make(chan struct{})}
	cmd.SysProcAttr = sysProcAttr(c.ownGroup)
	if err := cmd.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return nil, withCode(code, fmt.Errorf("cannot run %q: %w", argv[0], err))
	}
	go func() {
		cmd.Wait() // the exit status is read from ProcessState
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	return c, nil
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// signal sends sig to the command (to its whole group if it has one).
func (c *child) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if c.ownGroup {
		signalGroup(c.cmd.Process.Pid, s)
		return
	}
	c.cmd.Process.Signal(s)
}

// forward passes sig on to the command. When the command shares zkr's
// terminal, the terminal has already delivered INT and QUIT to it.
func (c *child) forward(sig os.Signal) {
	if !c.ownGroup && (sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
		return
	}
	c.signal(sig)
}

// supervise waits until the command exits, forwarding signals from sigs.
// When lost is closed first, the command is sent SIGTERM, then SIGKILL
// after grace; stopped reports that. code is the command's exit status, or
// 128+N if a signal N killed it.
func (c *child) supervise(sigs <-chan os.Signal, lost <-chan struct{}, grace time.Duration) (code int, stopped bool) {
	var kill <-chan time.Time
	for {
		select {
		case <-c.exited:
			if stopped && c.ownGroup {
				// Whatever the command left running in its group goes too.
				signalGroup(c.cmd.Process.Pid, syscall.SIGKILL)
			}
			return exitStatus(c.state), stopped
		case sig := <-sigs:
			c.forward(sig)
		case <-lost:
			lost, stopped = nil, true
			c.signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			c.signal(syscall.SIGKILL)
		}
	}
}

// describe says how the command ended, for messages.
func describe(code int) string {
	if code > exitSignal {
		return "killed by " + signalName(syscall.Signal(code-exitSignal))
	}
	return fmt.Sprintf("exit status %d", code)
}
