package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// This file is --requeue: zkr lock, elect and join under the library's
// supervisors (RunWhileLocked, RunWhileLeader, RunAsMember), which acquire
// again after a loss instead of exiting.

// requeueFlags are the --requeue and --restart options of lock, elect and
// join.
type requeueFlags struct {
	requeue bool
	restart string
}

// The values of --restart.
const (
	restartOnFailure = "on-failure"
	restartAlways    = "always"
	restartNever     = "never"
)

// addRequeueFlags adds --requeue and --restart to cmd; again is what zkr
// does again after a loss ("campaign", "lock", "join").
func addRequeueFlags(cmd *cobra.Command, r *requeueFlags, again string) {
	fl := cmd.Flags()
	fl.BoolVar(&r.requeue, "requeue", false, "after a loss (session expiry included), stop COMMAND and "+again+" again, on a new session if need be, instead of exiting")
	fl.StringVar(&r.restart, "restart", "", "with --requeue, what a COMMAND exiting on its own does: on-failure (the default) releases and "+again+"s again after a non-zero status and ends zkr after 0; always does it after every exit; never ends zkr with COMMAND's status")
}

// retry checks the flags and returns the supervisor's retry decision:
// whether a COMMAND that exited with err (nil: status 0) is run again, once
// held again. A COMMAND that cannot be started never is.
func (r requeueFlags) retry() (func(error) bool, error) {
	if !r.requeue {
		if r.restart != "" {
			return nil, usagef("--restart needs --requeue")
		}
		return nil, nil
	}
	notStart := func(err error) bool { return !errors.As(err, new(*startError)) }
	switch r.restart {
	case "", restartOnFailure:
		return func(err error) bool { return err != nil && notStart(err) }, nil
	case restartAlways:
		return notStart, nil
	case restartNever:
		return func(error) bool { return false }, nil
	}
	return nil, usagef("--restart %q: want %s, %s or %s", r.restart, restartOnFailure, restartAlways, restartNever)
}

// startError is a COMMAND that could not be started (it carries exit
// status 126 or 127): running it again would fail again.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// superviseFunc runs work under a holding, again and again: one of the
// library's supervisors, with the command's path and id.
type superviseFunc func(ctx context.Context, newSession func(context.Context) (*zkrecipes.Session, error), work func(context.Context) error, opts ...zkrecipes.SuperviseOption) error

// stopMargin is how much longer than --grace the supervisor waits for a
// stopped command before it releases regardless: the SIGKILL sent after
// --grace ends the command within it.
const stopMargin = 2 * time.Second

// holdSupervised is hold with --requeue: it runs argv (without argv: does
// nothing) each time h.supervise holds, stops it on a loss as hold does,
// and holds again, until SIGINT or SIGTERM (exit status 0: the command is
// stopped, the holding released) or until --restart says to stop.
func (a *app) holdSupervised(cmd *cobra.Command, h holdSpec, argv []string) error {
	retry, err := h.requeue.retry()
	if err != nil {
		return err
	}
	sigs := catchSignals()
	defer sigs.release()
	// The first session is made here, so that a bad server list or
	// refused credentials end zkr at once, as without --requeue.
	first, err := a.connectOrSignal(cmd.Context(), sigs, true)
	if err != nil {
		return err
	}
	defer func() {
		if first != nil { // the supervisor stopped before taking it
			closeSession(first)
		}
	}()
	cur := first // the supervisor's current session (its goroutine only)
	newSession := func(ctx context.Context) (*zkrecipes.Session, error) {
		if s := first; s != nil {
			first = nil
			return s, nil
		}
		s, err := a.connect(ctx, true)
		switch {
		case err == nil:
			cur = s
			a.logf(cmd, "new session 0x%x", s.ID())
		case ctx.Err() == nil:
			a.logf(cmd, "reconnecting: %v", err)
		}
		return s, err
	}

	// SIGINT and SIGTERM stop the supervisor; the others go to the
	// command, while one runs.
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	fwd := make(chan os.Signal, len(forwarded))
	go func() {
		for {
			select {
			case sig := <-sigs.ch:
				if sig == syscall.SIGINT || sig == syscall.SIGTERM {
					a.logf(cmd, "%s: stopping", signalName(sig.(syscall.Signal)))
					stop()
					return
				}
				select {
				case fwd <- sig:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	name := cmd.CommandPath()
	work := func(wctx context.Context) error {
		token, _ := zkrecipes.HeldToken(wctx)
		a.metrics.readyUntil(wctx.Done(), "lost "+h.what)
		if h.heldLog != "" {
			a.logf(cmd, "%s (fencing token %d)", h.heldLog, token)
		}
		if len(argv) == 0 {
			fmt.Fprintf(a.stderr, "%s: %s until interrupted\n", name, h.idle)
			<-wctx.Done()
			return nil
		}
		for len(fwd) > 0 { // signals that came between two commands
			<-fwd
		}
		c, err := startChild(argv, append(holderEnv(h.path, token), h.env...), a.stdin, a.stdout, a.stderr)
		if err != nil {
			return &startError{err}
		}
		a.logf(cmd, "started %q (pid %d) holding %s", argv[0], c.cmd.Process.Pid, h.what)
		code, stopped := c.supervise(fwd, wctx.Done(), h.grace)
		var werr error
		if code != 0 {
			werr = status(code)
		}
		switch {
		case stopped && ctx.Err() != nil:
			a.logf(cmd, "stopped the command (%s)", describe(code))
		case stopped:
			fmt.Fprintf(a.stderr, "%s: stopped the command (%s)\n", name, describe(code))
		case retry(werr):
			fmt.Fprintf(a.stderr, "%s: the command exited (%s); %s again\n", name, describe(code), h.doing)
		default:
			a.logf(cmd, "command exited: %s", describe(code))
		}
		return werr
	}
	events := func(ev zkrecipes.SupervisorEvent) {
		switch ev.State {
		case zkrecipes.SupervisorAcquiring:
			a.metrics.waiting(h.doing)
			if h.waitLog != "" {
				a.logf(cmd, "%s (session 0x%x)", h.waitLog, ev.Session)
			}
		case zkrecipes.SupervisorCancelled:
			if ev.Reason != "" {
				fmt.Fprintf(a.stderr, "%s: lost %s: %s; %s again\n", name, h.what, lossReason(cur), h.doing)
			}
		case zkrecipes.SupervisorOverran:
			fmt.Fprintf(a.stderr, "%s: releasing %s: %v\n", name, h.what, ev.Err)
		case zkrecipes.SupervisorPause:
			a.logf(cmd, "pausing %v: %v", ev.Pause.Round(time.Millisecond), ev.Err)
		case zkrecipes.SupervisorReleased:
			if ev.Err != nil {
				a.logf(cmd, "releasing %s: %v", h.what, ev.Err)
			} else {
				a.logf(cmd, "released %s", h.what)
			}
		}
	}
	err = h.supervise(ctx, newSession, work,
		zkrecipes.WithRetry(retry),
		zkrecipes.WithGracePeriod(h.grace+stopMargin),
		zkrecipes.WithSupervisorEvents(events))
	if err != nil {
		return recipeError(h.doing, err) // a *startError or --restart never's status carries its exit status
	}
	return nil
}
