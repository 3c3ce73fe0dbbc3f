package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// holding is what a command runs under: a lock, a leadership, a membership.
type holding struct {
	what  string // for messages: "the lock on /x"
	lost  <-chan struct{}
	env   []string // given to the command
	grace time.Duration
}

// runHeld runs argv while h is held and returns zkr's exit: the command's
// status, or exitLost with the reason when the holding was lost first.
func (a *app) runHeld(cmd *cobra.Command, s *zkrecipes.Session, h holding, sigs *signals, argv []string) error {
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
