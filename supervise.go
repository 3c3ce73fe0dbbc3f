package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file is the supervisors: RunWhileLeader, RunWhileLocked and
// RunAsMember hold a leadership, a lock or a membership "forever", across
// losses and session expiry, and run the caller's work only while it is
// held.

// SuperviseOption configures [RunWhileLeader], [RunWhileLocked] and
// RunAsMember.
type SuperviseOption func(*superviseConfig)

type superviseConfig struct {
	grace  time.Duration
	retry  func(error) bool
	events func(SupervisorEvent)
	lock   []LockOption
}

// DefaultGracePeriod is how long a supervisor waits, by default, for the
// work to return after cancelling its context before it releases what it
// holds anyway (see [WithGracePeriod]).
const DefaultGracePeriod = 10 * time.Second

// WithGracePeriod sets how long a supervisor waits for the work to return
// once it cancelled the work's context (the holding was lost, or the
// caller's context ended) before it releases the holding regardless
// (default [DefaultGracePeriod]). An overrun is reported ([SupervisorOverran])
// and logged on the session's logger. The supervisor still waits for the
// work to return before it acquires again or returns itself: a process
// never runs the work twice at once, and nothing of it is left running.
// d must be positive.
func WithGracePeriod(d time.Duration) SuperviseOption {
	return func(c *superviseConfig) { c.grace = d }
}

// WithRetry decides what a supervisor does when the work returns on its
// own, while the holding was still held and the caller's context alive:
// retry(err) true releases the holding and acquires it again after a
// pause (see [RunWhileLeader]); false releases it and makes the supervisor return
// err. The default retries a non-nil error and stops on nil (the work is
// done). retry is not asked when the work returns after its context was
// cancelled: after a loss the supervisor always acquires again, and when
// the caller's context ended it returns nil.
//
// To requeue after every return, as Apache Curator's LeaderSelector with
// autoRequeue does, give func(error) bool { return true }; to stop at the
// first error, func(error) bool { return false }.
func WithRetry(retry func(err error) bool) SuperviseOption {
	return func(c *superviseConfig) { c.retry = retry }
}

// WithSupervisorEvents calls f with each step of the supervisor's life
// (see [SupervisorEvent]), synchronously, on the supervisor's goroutine: f
// must return quickly and not block. The recipes' own events (the
// Observer's Queued, Granted, Lost...) are told by the sessions the
// factory makes, if it gives them [WithObserver].
func WithSupervisorEvents(f func(SupervisorEvent)) SuperviseOption {
	return func(c *superviseConfig) { c.events = f }
}

// WithLockOptions passes options to the Mutex of [RunWhileLocked] (such as
// [WithNodeData]). Other supervisors ignore them.
func WithLockOptions(opts ...LockOption) SuperviseOption {
	return func(c *superviseConfig) { c.lock = append(c.lock, opts...) }
}

// SupervisorState is a step of a supervisor's life, for [SupervisorEvent].
type SupervisorState string

// The steps of a supervisor's life. Each attempt is: Pause (from the
// second attempt on), Renewing (when there is no live session), Acquiring,
// and, if that succeeded, Running, then Cancelled unless the work returned
// on its own, then either Returned and Released, or (past the grace
// period) Overran, Released and Returned; a holding void as soon as
// acquired (strict mode, a link still down) is Released without Running.
// Released is told only when the session lived to give the holding back.
// Stopped is the last event.
const (
	SupervisorPause     SupervisorState = "pause"     // waiting Pause before the next attempt; Err says why
	SupervisorRenewing  SupervisorState = "renewing"  // asking the factory for a session (none yet, or the last is over: Err)
	SupervisorAcquiring SupervisorState = "acquiring" // campaigning, locking or joining on Session
	SupervisorRunning   SupervisorState = "running"   // acquired: the work started (Token)
	SupervisorCancelled SupervisorState = "cancelled" // the work's context was cancelled: on a loss (Reason), or the caller's context ended (Err)
	SupervisorOverran   SupervisorState = "overran"   // the work did not return within the grace period; the holding is released regardless
	SupervisorReturned  SupervisorState = "returned"  // the work returned Err after running Ran
	SupervisorReleased  SupervisorState = "released"  // the holding was given back (Err if that was not confirmed)
	SupervisorStopped   SupervisorState = "stopped"   // the supervisor returns Err (nil when the caller's context ended)
)

// SupervisorEvent is one step of a supervisor's life, for
// WithSupervisorEvents.
type SupervisorEvent struct {
	State   SupervisorState
	Recipe  string        // "election", "mutex" or "group"
	Path    string        // the recipe's path
	Session int64         // the id of the session it is on; 0 when none
	Token   int64         // Running: the fencing token (0 for a group)
	Reason  LossReason    // Cancelled on a loss: why it was lost
	Ran     time.Duration // Returned: how long the work ran
	Pause   time.Duration // Pause: how long
	Err     error
}

// RunWhileLeader campaigns in the election on path as id (see
// [NewElection]) and runs work while it leads, again and again, until ctx
// ends or work's result stops it (see [WithRetry]); it is Apache Curator's
// LeaderSelector with autoRequeue, or kazoo's Election.run in a loop.
//
// Each time it leads, work runs with a context that is cancelled at the
// first sign of loss: when the leadership's Lost channel closes (the
// session expired or was closed, the node was deleted, or, in strict mode,
// the session may be about to expire; see [WithStrict]), or when ctx ends.
// work must then return promptly: the supervisor waits for it (see
// [WithGracePeriod]) before it resigns, campaigns again or returns, so that
// a process never runs work twice at once and, with strict sessions, the
// work is cancelled before another process can lead. As with any lease,
// a process that is frozen, or work that overruns the grace period, can
// still act after another leader was elected: guard what the work writes
// with the context's cancellation and the leadership's fencing token,
// which [HeldToken] reads from the work's context.
//
// The sessions come from newSession and belong to the supervisor, which
// closes them: a session whose holding was lost while it lives (a node
// deleted, strict mode) is used again; one that is over (expired, or
// closed after a release that could not be confirmed) is replaced by a
// new one. newSession must return when its ctx ends. Every attempt after
// the first (after a failure of newSession, of a campaign or of the work,
// or after a loss) waits for a pause drawn from the upper half of a bound
// that doubles from 100 ms to 5 s and starts over after 10 s without a
// failure: a permanent failure costs an attempt every 2.5 to 5 s, not a
// tight loop. A supervisor costs a goroutine for the work, besides its
// session's.
//
// When ctx ends, the supervisor cancels work, waits for it, resigns (the
// delete is retried for up to the session timeout on a broken link),
// closes its session and returns nil. It returns early with an error only
// for an invalid argument, an error a new attempt cannot cure (an ACL
// refusing the session, say), or work's error when [WithRetry] says to
// stop.
func RunWhileLeader(ctx context.Context, newSession func(context.Context) (*Session, error), path, id string, work func(ctx context.Context) error, opts ...SuperviseOption) error {
	if id == "" {
		return fmt.Errorf("%w: run while leader of %s: empty participant id", ErrInvalidArgument, path)
	}
	return supervise(ctx, newSession, "election", path, work, opts, func(s *Session, _ *superviseConfig) holding {
		return electionHolding{NewElection(s, path, id)}
	})
}

// RunWhileLocked locks the Mutex on path and runs work while it holds it,
// again and again, until ctx ends or work's result stops it: it is
// [RunWhileLeader] (read it for the whole contract) with a [Mutex] (given
// [WithLockOptions]) instead of an election.
func RunWhileLocked(ctx context.Context, newSession func(context.Context) (*Session, error), path string, work func(ctx context.Context) error, opts ...SuperviseOption) error {
	return supervise(ctx, newSession, "mutex", path, work, opts, func(s *Session, c *superviseConfig) holding {
		return mutexHolding{NewMutex(s, path, c.lock...)}
	})
}

// RunAsMember joins the group on path as memberID with data (see
// [JoinGroup]) and runs work while it is a member, again and again, until
// ctx ends or work's result stops it: it is [RunWhileLeader] (read it for
// the whole contract) with a membership instead of a leadership. If
// memberID is taken, by another session or by this process's own node of
// a session that is not over yet, it waits until that member is gone.
func RunAsMember(ctx context.Context, newSession func(context.Context) (*Session, error), path, memberID string, data []byte, work func(ctx context.Context) error, opts ...SuperviseOption) error {
	if memberID == "" || memberID == "." || memberID == ".." || strings.Contains(memberID, "/") {
		return errorf("run as member of %s: %w: member id %q is not one path segment", path, ErrInvalidArgument, memberID)
	}
	if err := checkPath(path + "/" + memberID); err != nil {
		return errorf("run as member of %s: %w", path, err)
	}
	return supervise(ctx, newSession, "group", path, work, opts, func(s *Session, _ *superviseConfig) holding {
		return &groupHolding{s: s, path: path, id: memberID, data: data}
	})
}

// tokenKey is the context key of the fencing token of supervised work.
type tokenKey struct{}

// HeldToken returns the fencing token of the holding under which the
// supervised work given ctx runs (see [Mutex.Token] and [Election.Token]),
// for the work to give to the resource it guards, and whether ctx is such
// a work's context (or derived from one). A membership has no token: 0.
func HeldToken(ctx context.Context) (token int64, ok bool) {
	token, ok = ctx.Value(tokenKey{}).(int64)
	return token, ok
}

// holding is what a supervisor acquires on one session, once.
type holding interface {
	acquire(ctx context.Context) error
	lost() <-chan struct{}
	token() int64
	release(ctx context.Context) error
}

type electionHolding struct{ e *Election }

func (h electionHolding) acquire(ctx context.Context) error { return h.e.Campaign(ctx) }
func (h electionHolding) lost() <-chan struct{}             { return h.e.Lost() }
func (h electionHolding) token() int64                      { return h.e.Token() }
func (h electionHolding) release(ctx context.Context) error { return h.e.Resign(ctx) }

type mutexHolding struct{ m *Mutex }

func (h mutexHolding) acquire(ctx context.Context) error { return h.m.Lock(ctx) }
func (h mutexHolding) lost() <-chan struct{}             { return h.m.Lost() }
func (h mutexHolding) token() int64                      { return h.m.Token() }
func (h mutexHolding) release(ctx context.Context) error { return h.m.Unlock(ctx) }

type groupHolding struct {
	s        *Session
	path, id string
	data     []byte
	g        *Group
}

// acquire joins, waiting for a member of that id to go first.
func (h *groupHolding) acquire(ctx context.Context) error {
	for {
		g, err := JoinGroup(ctx, h.s, h.path, h.id, h.data)
		if err == nil {
			h.g = g
			return nil
		}
		if !errors.Is(err, ErrMemberExists) {
			return err
		}
		if err := h.s.awaitDeleted(ctx, h.path+"/"+h.id, readStat, nil); err != nil {
			return err
		}
	}
}

func (h *groupHolding) lost() <-chan struct{}             { return h.g.Lost() }
func (h *groupHolding) token() int64                      { return 0 }
func (h *groupHolding) release(ctx context.Context) error { return h.g.Leave(ctx) }

// supervisor is one call of a supervisor: its sessions and pauses.
type supervisor struct {
	superviseConfig
	recipe, path string
	newSession   func(context.Context) (*Session, error)
	newHolding   func(*Session, *superviseConfig) holding
	work         func(context.Context) error

	s *Session // the current session, made by newSession; nil: none
	b backoff
}

func supervise(ctx context.Context, newSession func(context.Context) (*Session, error), recipe, path string, work func(context.Context) error, opts []SuperviseOption, newHolding func(*Session, *superviseConfig) holding) error {
	sv := &supervisor{recipe: recipe, path: path, newSession: newSession, newHolding: newHolding, work: work}
	sv.grace = DefaultGracePeriod
	sv.retry = func(err error) bool { return err != nil }
	for _, o := range opts {
		o(&sv.superviseConfig)
	}
	switch {
	case newSession == nil:
		return fmt.Errorf("%w: supervise %s %s: nil session factory", ErrInvalidArgument, recipe, path)
	case work == nil:
		return fmt.Errorf("%w: supervise %s %s: nil work", ErrInvalidArgument, recipe, path)
	case sv.grace <= 0:
		return fmt.Errorf("%w: supervise %s %s: grace period %v is not positive", ErrInvalidArgument, recipe, path, sv.grace)
	case sv.retry == nil:
		return fmt.Errorf("%w: supervise %s %s: nil retry func", ErrInvalidArgument, recipe, path)
	}
	if err := checkPath(path); err != nil {
		return err
	}
	err := sv.run(ctx)
	if sv.s != nil {
		sv.s.Close()
	}
	sv.tell(SupervisorEvent{State: SupervisorStopped, Err: err})
	return err
}

// run acquires and runs the work until ctx ends (nil) or a stop (the error
// to return).
func (sv *supervisor) run(ctx context.Context) error {
	var why error // why the last attempt failed; nil: the first attempt
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := sv.b.next()
			sv.tell(SupervisorEvent{State: SupervisorPause, Pause: d, Err: why})
			if sv.b.wait(ctx, d) != nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if sv.s != nil && sv.s.Err() != nil {
			sv.s.Close()
			sv.s = nil
		}
		if sv.s == nil {
			sv.tell(SupervisorEvent{State: SupervisorRenewing, Err: why})
			s, err := sv.newSession(ctx)
			switch {
			case ctx.Err() != nil:
				if s != nil {
					s.Close()
				}
				return nil
			case err != nil:
				why = errorf("new session: %w", err)
				continue
			case s == nil:
				why = errorf("new session: %w: the factory returned no session and no error", ErrInvalidArgument)
				continue
			}
			sv.s = s
		}
		var stop bool
		stop, why = sv.once(ctx)
		if stop {
			return why
		}
	}
}

// once acquires on the current session and, if that worked, runs the work
// until it returns, then releases. It returns whether to stop, and the
// error to stop with or why the next attempt waits.
func (sv *supervisor) once(ctx context.Context) (stop bool, err error) {
	s := sv.s
	h := sv.newHolding(s, &sv.superviseConfig)
	sv.tell(SupervisorEvent{State: SupervisorAcquiring})
	if err := h.acquire(ctx); err != nil {
		switch {
		case ctx.Err() != nil:
			return true, nil
		case s.Err() == nil && incurable(err):
			return true, errorf("supervise %s %s: %w", sv.recipe, sv.path, err)
		}
		return false, err
	}
	lost := h.lost()
	select {
	case <-lost:
		// Void as soon as granted (strict mode, a link still down):
		// give it back without running the work.
		sv.release(ctx, h)
		return false, errorf("%s %s lost as soon as acquired: %w", sv.recipe, sv.path, sv.lossErr(s))
	default:
	}

	token := h.token()
	wctx, cancel := context.WithCancel(context.WithValue(ctx, tokenKey{}, token))
	defer cancel()
	sv.tell(SupervisorEvent{State: SupervisorRunning, Token: token})
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- sv.work(wctx) }()

	var (
		werr     error
		returned bool
		onLoss   bool
	)
	select {
	case werr = <-done:
		returned = true
	case <-lost:
		cancel()
		onLoss = true
		sv.tell(SupervisorEvent{State: SupervisorCancelled, Reason: lossReason(s)})
	case <-ctx.Done():
		cancel()
		sv.tell(SupervisorEvent{State: SupervisorCancelled, Err: ctx.Err()})
	}
	if !returned {
		t := time.NewTimer(sv.grace)
		select {
		case werr = <-done:
			returned = true
		case <-t.C:
			s.log.Warn("zkrecipes: supervised work did not return within the grace period of its cancellation; releasing regardless",
				"recipe", sv.recipe, "path", sv.path, "grace", sv.grace)
			sv.tell(SupervisorEvent{State: SupervisorOverran, Err: fmt.Errorf("the work ran %v past its grace period", sv.grace)})
		}
		t.Stop()
	}
	if returned {
		sv.tell(SupervisorEvent{State: SupervisorReturned, Ran: time.Since(start), Err: werr})
	}
	sv.release(ctx, h)
	if !returned {
		werr = <-done
		sv.tell(SupervisorEvent{State: SupervisorReturned, Ran: time.Since(start), Err: werr})
	}
	switch {
	case ctx.Err() != nil:
		return true, nil
	case onLoss:
		return false, errorf("%s %s lost: %w", sv.recipe, sv.path, sv.lossErr(s))
	case !sv.retry(werr):
		return true, werr
	case werr == nil:
		return false, nil
	}
	return false, errorf("supervised work: %w", werr)
}

// incurable tells an acquisition's error that another attempt would meet
// again: a bad argument, path or ACL, a node refusing the session, a
// request too large. Any other (a connection loss, a server's error, a
// release not confirmed) is retried, after a pause.
func incurable(err error) bool {
	for _, e := range []error{ErrInvalidArgument, ErrSequenceWrapped, zkclient.ErrInvalidPath, zkclient.ErrTooLarge,
		zkclient.ErrNoAuth, zkclient.ErrInvalidACL, zkclient.ErrBadArguments, zkclient.ErrNoChildrenForEphemerals, zkclient.ErrUnimplemented} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// release gives h back, unless the session is over; if that cannot be
// confirmed while the session lives, the session is closed (its node may
// remain, and would queue ahead of the next attempt's), to be replaced.
func (sv *supervisor) release(ctx context.Context, h holding) {
	s := sv.s
	if s.Err() != nil {
		return
	}
	err := h.release(context.WithoutCancel(ctx))
	sv.tell(SupervisorEvent{State: SupervisorReleased, Err: err})
	if err != nil && s.Err() == nil {
		s.log.Warn("zkrecipes: supervisor's release not confirmed; closing its session", "recipe", sv.recipe, "path", sv.path, "err", err)
		s.Close()
	}
}

// lossReason says why the holdings of s were void (or their node gone).
func lossReason(s *Session) LossReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.over || s.void:
		return s.voided
	}
	return LossDeleted
}

// lossErr describes a loss on s.
func (sv *supervisor) lossErr(s *Session) error {
	if err := s.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w (%s)", ErrNotHeld, lossReason(s))
}

// tell calls the events func, if any, with ev completed.
func (sv *supervisor) tell(ev SupervisorEvent) {
	if sv.events == nil {
		return
	}
	ev.Recipe, ev.Path = sv.recipe, sv.path
	if sv.s != nil {
		ev.Session = sv.s.ID()
	}
	sv.events(ev)
}
