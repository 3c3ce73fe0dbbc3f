package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// holdSpec is what zkr lock, elect or join holds, and how to get it;
// (*app).hold does the rest, the same for all three.
type holdSpec struct {
	path  string // ZKR_PATH
	what  string // what is held, for messages: "the lock on /x"
	doing string // what zkr does until it holds it, for messages: "waiting for the lock on /x"
	// waitLog and heldLog are logged (-v) before the waiting, with the
	// session, and once held, with the fencing token; "" logs nothing.
	waitLog, heldLog string
	timeout          time.Duration // --timeout: give up after this long (exit status 3); 0 waits forever
	grace            time.Duration // --grace
	env              []string      // given to the command after ZKR_PATH and ZKR_FENCING_TOKEN
	idle             string        // without a command: "until interrupted" follows it on stderr
	// take waits for the holding on s. An error that already carries an
	// exit status (exit status 4: held by another) is returned as is.
	take func(ctx context.Context, s *zkrecipes.Session) (taken, error)
	// With requeue.requeue, supervise replaces take: zkr holds again after
	// a loss (see holdSupervised).
	requeue   requeueFlags
	supervise superviseFunc
}

// taken is a holding obtained.
type taken struct {
	release func(context.Context) error
	lost    <-chan struct{}
	token   int64
}

// errHoldTimeout is the cause of a --timeout expiring.
var errHoldTimeout = errors.New("timeout")

// hold connects on a strict session, waits for what h describes, runs argv
// while holding it (without argv: until a signal comes or the holding is
// lost), releases it on every way out, and returns zkr's exit.
func (a *app) hold(cmd *cobra.Command, h holdSpec, argv []string) error {
	if h.requeue != (requeueFlags{}) {
		return a.holdSupervised(cmd, h, argv)
	}
	sigs := catchSignals()
	defer sigs.release()
	ctx := cmd.Context()
	s, err := a.connectOrSignal(ctx, sigs, true)
	if err != nil {
		return err
	}
	defer closeSession(s)

	tctx := ctx
	if h.timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeoutCause(ctx, h.timeout, errHoldTimeout)
		defer cancel()
	}
	if h.waitLog != "" {
		a.logf(cmd, "%s (session 0x%x)", h.waitLog, s.ID())
	}
	a.metrics.waiting(h.doing)
	var t taken
	sig, err := waitFor(tctx, sigs, func(ctx context.Context) error {
		var err error
		t, err = h.take(ctx, s)
		return err
	})
	if err == nil {
		defer release(cmd, a, s, h.what, t.lost, t.release)
	}
	if sig == nil && errors.Is(err, context.DeadlineExceeded) && context.Cause(tctx) == errHoldTimeout {
		return codef(exitTimeout, "timed out after %v %s", h.timeout, h.doing)
	}
	if err := waitError(sig, err, h.doing); err != nil {
		return err
	}
	a.metrics.readyUntil(t.lost, "lost "+h.what)
	if h.heldLog != "" {
		a.logf(cmd, "%s (fencing token %d)", h.heldLog, t.token)
	}
	return a.runHeld(cmd, s, holding{
		what:  h.what,
		lost:  t.lost,
		env:   append(holderEnv(h.path, t.token), h.env...),
		grace: h.grace,
		idle:  h.idle,
		end:   t.lost,
		ended: func() error { return codef(exitLost, "lost %s: %s", h.what, lossReason(s)) },
	}, sigs, argv)
}

// waitError is zkr's exit after waitFor returned sig and err, waiting for
// doing: stopped by the signal, err's own exit status, or a ZooKeeper error.
func waitError(sig os.Signal, err error, doing string) error {
	switch {
	case sig != nil:
		return signalled(sig, doing)
	case err != nil:
		return recipeError(doing, err)
	}
	return nil
}

// holding is what a command runs under: a lock, a leadership, a membership.
type holding struct {
	what  string // for messages: "the lock on /x"
	lost  <-chan struct{}
	env   []string // given to the command
	grace time.Duration
	// Without a command, zkr says it holds idle "until interrupted" and
	// waits for a signal (exit status 0) or for end; then it returns ended().
	idle  string
	end   <-chan struct{}
	ended func() error
}

// runHeld runs argv while h is held and returns zkr's exit: the command's
// status, or exitLost with the reason when the holding was lost first.
// Without argv it waits as h says.
func (a *app) runHeld(cmd *cobra.Command, s *zkrecipes.Session, h holding, sigs *signals, argv []string) error {
	if len(argv) == 0 {
		fmt.Fprintf(a.stderr, "%s: %s until interrupted\n", cmd.CommandPath(), h.idle)
		select {
		case <-sigs.ch:
			return nil
		case <-h.end:
			return h.ended()
		}
	}
	select {
	case <-h.lost:
		return codef(exitLost, "lost %s before the command started: %s", h.what, lossReason(s))
	default:
	}
	c, err := startChild(argv, h.env, a.stdin, a.stdout, a.stderr)
	if err != nil {
		return err
	}
	a.logf(cmd, "started %q (pid %d) holding %s", argv[0], c.cmd.Process.Pid, h.what)
	code, stopped := c.supervise(sigs.ch, h.lost, h.grace)
	if stopped {
		return codef(exitLost, "lost %s while the command ran: %s; stopped the command (%s)", h.what, lossReason(s), describe(code))
	}
	a.logf(cmd, "command exited: %s", describe(code))
	return status(code)
}

// lossReason says why a holding is void.
func lossReason(s *zkrecipes.Session) string {
	switch {
	case s.Err() != nil:
		return s.Err().Error()
	case !s.Connected():
		return fmt.Sprintf("connection to ZooKeeper down for half the %v session timeout, so the session may have expired", s.Timeout())
	}
	return "its node was deleted, or the connection was down too long"
}

// holderEnv is the environment every command gets.
func holderEnv(path string, token int64) []string {
	return []string{
		"ZKR_PATH=" + path,
		"ZKR_FENCING_TOKEN=" + strconv.FormatInt(token, 10),
	}
}

// releaseWait bounds the wait for a release, and closeWait the wait for
// the session to close. Closing the session, which always follows a
// release, makes the server delete whatever the session still holds; if the
// server cannot be reached, it deletes it when it expires the session.
const (
	releaseWait = 2 * time.Second
	closeWait   = 1500 * time.Millisecond
)

// release undoes an acquisition with f; it runs on every way out,
// interrupted or not. A holding already lost (lost is closed) while the
// connection is down is left to closeSession: waiting for the connection to
// come back would only delay zkr's exit.
func release(cmd *cobra.Command, a *app, s *zkrecipes.Session, what string, lost <-chan struct{}, f func(context.Context) error) {
	select {
	case <-lost:
		if !s.Connected() {
			a.logf(cmd, "not connected to ZooKeeper: %s goes with the session", what)
			return
		}
	default:
	}
	done := make(chan error, 1)
	go func() { done <- f(context.Background()) }() // ends at the latest when the session is closed
	select {
	case err := <-done:
		if err != nil {
			a.logf(cmd, "releasing %s: %v", what, err)
			return
		}
		a.logf(cmd, "released %s", what)
	case <-time.After(releaseWait):
		a.logf(cmd, "releasing %s: no answer within %v; it goes with the session", what, releaseWait)
	}
}

// closeSession closes s, waiting at most closeWait: zkr is about to exit,
// and a session that cannot say goodbye to the server expires there.
func closeSession(s *zkrecipes.Session) {
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}

// waitFor runs acquire until it returns or a signal comes; on a signal it
// waits for acquire to give up (it cleans up after itself) and returns the
// signal.
func waitFor(ctx context.Context, sigs *signals, acquire func(context.Context) error) (os.Signal, error) {
	ctx, stop := sigs.cancelOn(ctx)
	err := acquire(ctx)
	return stop(), err
}

// connectOrSignal connects like connect, giving up on a signal.
func (a *app) connectOrSignal(ctx context.Context, sigs *signals, strict bool) (*zkrecipes.Session, error) {
	var s *zkrecipes.Session
	sig, err := waitFor(ctx, sigs, func(ctx context.Context) error {
		var err error
		s, err = a.connect(ctx, strict)
		return err
	})
	if sig != nil {
		if s != nil {
			s.Close()
		}
		return nil, signalled(sig, "connecting to ZooKeeper")
	}
	return s, err
}
