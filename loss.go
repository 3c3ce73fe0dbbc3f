package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file is how the Session tracks its holdings (locks, leadership,
// membership, leases) and tells their loss: the session ending, strict
// mode's margin passing without an answer, or the holding's own node
// being deleted by someone else.

// margin returns strict mode's margin for the negotiated timeout.
func (s *Session) margin() time.Duration {
	return time.Duration(float64(s.c.Timeout()) * s.strict)
}

// watchStrict voids the holdings whenever the newest answered send gets
// older than the margin, checked by a timer set to that very moment and
// set again after each check.
func (s *Session) watchStrict() {
	defer close(s.strictDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.rearm:
		case <-s.c.Done():
			return
		}
		margin := s.margin()
		wait := time.Until(s.c.Confirmed().Add(margin))
		id, server := s.c.SessionID(), s.c.Server()
		s.mu.Lock()
		if wait <= 0 {
			if !s.void {
				s.void = true
				if len(s.holds) > 0 {
					s.log.Warn("no answer from zookeeper for a send in the strict margin; holdings reported lost",
						"session", fmt.Sprintf("0x%x", id), "margin", margin)
				}
			}
			s.voidHoldsLocked(LossStrict)
			s.tellLostLocked()
			wait = max(min(margin/16, 50*time.Millisecond), time.Millisecond)
		} else {
			if s.void && s.lostTold && !s.over {
				// Answers came again without a reconnection (a slow
				// link that recovered): new holdings can be taken.
				s.lostTold = false
				s.tellLocked(SessionEvent{State: SessionReconnected, Server: server})
			}
			s.void = false
		}
		s.mu.Unlock()
		t.Stop()
		t.Reset(wait)
	}
}

// voidHoldsLocked calls the holdings' onVoid funcs with why and closes
// their channels: each loss is decided before its channel can wake a holder
// that would release (and have it told as a release).
func (s *Session) voidHoldsLocked(why LossReason) {
	s.voided = why
	for ch, onVoid := range s.holds {
		if onVoid != nil {
			onVoid(why)
		}
		close(ch)
	}
	clear(s.holds)
}

// hold registers a holding. The returned channel closes when the holding is
// void: the session ended or, in strict mode, the server may be about to
// expire it; onVoid, if not nil, is then called with why, under s.mu.
// release closes it and forgets it; it is idempotent.
func (s *Session) hold(onVoid func(LossReason)) (lost <-chan struct{}, release func()) {
	ch := make(chan struct{})
	margin := s.margin() // not under s.mu: it asks the client
	s.mu.Lock()
	if s.over || s.strict > 0 && time.Since(s.c.Confirmed()) >= margin {
		if onVoid != nil {
			why := LossStrict
			if s.over {
				why = s.voided
			}
			onVoid(why)
		}
		close(ch)
		s.mu.Unlock()
		return ch, func() {}
	}
	s.holds[ch] = onVoid
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.holds[ch]; ok {
			delete(s.holds, ch)
			close(ch)
		}
	}
}

// nodeHold is a holding embodied by one node of this session (a lock, a
// leadership, a membership). Its lost channel closes when the session's
// holdings are void (see Session.hold) and also when the node is deleted,
// by whoever deletes it: a holder whose node an operator removed must not
// go on believing it holds. It costs one data watch (a getData request per
// holding) and one goroutine; a holding ended by deleting its own node
// (drop, then settle) costs no request to remove the watch, since the
// deletion fires it.
type nodeHold struct {
	s       *Session
	lost    <-chan struct{}
	release func()
	cancel  context.CancelFunc
	done    chan struct{}
	dropped atomic.Bool // the holder is deleting the node itself

	ended atomic.Bool // the holding's end (loss, or drop) is decided
	told  *HoldEvent  // the grant, for the Observer's Lost and Released; nil: not told
	since time.Time   // when it was granted, with told
}

// holdNode registers a holding embodied by the node p and starts watching p.
func (s *Session) holdNode(p string) *nodeHold { return s.holdNodeTold(p, nil) }

// holdNodeTold is holdNode; if told is not nil, the Session's Observer is
// told of the holding's loss (Lost) as told, with the reason.
func (s *Session) holdNodeTold(p string, told *HoldEvent) *nodeHold {
	h := &nodeHold{s: s, done: make(chan struct{}), told: told}
	if told != nil {
		h.since = time.Now()
	}
	// lose decides the end even untold: drop and quit report whether the
	// holding was lost first.
	h.lost, h.release = s.hold(h.lose)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go h.watch(ctx, s, p)
	return h
}

// lose decides that the holding ended by its loss, unless its end was
// decided already (by drop), and tells the Observer. It runs when the
// session's holdings are void (under s.mu), or on the watch when someone
// else deleted the node.
func (h *nodeHold) lose(why LossReason) {
	if !h.ended.CompareAndSwap(false, true) || h.told == nil || h.s.obs.Lost == nil {
		return
	}
	ev := *h.told
	ev.Reason, ev.Held = why, time.Since(h.since)
	h.s.obs.Lost(ev)
}

// released tells the Observer that the holder released the holding, if
// drop found it still held; err is the release's outcome.
func (h *nodeHold) released(held bool, err error) {
	if !held || h.told == nil || h.s.obs.Released == nil {
		return
	}
	ev := *h.told
	ev.Held, ev.Err = time.Since(h.since), err
	h.s.obs.Released(ev)
}

func (h *nodeHold) watch(ctx context.Context, s *Session, p string) {
	defer close(h.done)
	for {
		rd, err := s.read(ctx, p, reading{op: readData, watch: true, count: &s.stats.holdWatches})
		w := rd.w
		if errors.Is(err, zkclient.ErrNoNode) {
			if !h.dropped.Load() {
				h.lose(LossDeleted)
			}
			h.release()
			return
		}
		if err != nil {
			return // end was called, or the session is over (which voided the holding)
		}
		lost := h.lost
	wait:
		select {
		case ev := <-w.event():
			if ev.Type != zkclient.EventNotWatching {
				s.stats.holdEvents.Add(1)
			}
			if ev.Type == zkclient.EventNodeDeleted || h.dropped.Load() {
				if !h.dropped.Load() {
					h.lose(LossDeleted)
				}
				h.release()
				return
			}
			// Data changed: look again (NotWatching: the session is
			// over, and the next call says so).
		case <-lost:
			if h.dropped.Load() {
				// The holder's own delete is on its way and will
				// fire the watch: wait for it rather than remove it.
				lost = nil
				goto wait
			}
			w.stop()
			return
		case <-ctx.Done():
			w.stop()
			return
		}
	}
}

// end stops watching and closes lost. It is idempotent.
func (h *nodeHold) end() {
	h.cancel()
	<-h.done
	h.release()
}

// quit ends the holding for a holder that gives it up (see end) and
// reports whether it was still held: false if it was lost first. Its end
// is decided before the holding is let go, so that a loss racing with it is
// not told as well. Follow with released.
func (h *nodeHold) quit() (held bool) {
	held = h.ended.CompareAndSwap(false, true)
	h.end()
	return held
}

// drop closes lost at once, for a holder about to delete the node itself:
// the watch stays until the deletion fires it. Follow with settle. It
// reports whether the holding was still held: false if it was lost first.
func (h *nodeHold) drop() (held bool) {
	h.dropped.Store(true)
	h.release()
	return h.ended.CompareAndSwap(false, true)
}

// settle ends the watch after drop. deleted says the server confirmed the
// node's deletion: its watch event came before that answer (ZooKeeper
// sends a session's notifications ahead of the reply to the request that
// caused them), so the watch ends by itself; should it not within the
// session timeout, or without that confirmation, the watch is removed.
func (h *nodeHold) settle(deleted bool) {
	if deleted {
		t := time.NewTimer(h.s.Timeout())
		defer t.Stop()
		select {
		case <-h.done:
			return
		case <-t.C:
		}
	}
	h.cancel()
	<-h.done
}

// acquiring is one acquisition told to the Session's Observer: Queued when
// it begins (Session.queued), then granted or abandoned. With no Observer
// it is inert and costs nothing.
type acquiring struct {
	o     *Observer
	ev    HoldEvent
	start time.Time
}

// queued tells the Observer, if any, that an acquisition of recipe on path
// began, and returns it.
func (s *Session) queued(ctx context.Context, recipe, path string) acquiring {
	if s.obs == nil {
		return acquiring{}
	}
	a := acquiring{o: s.obs, ev: HoldEvent{Context: ctx, Recipe: recipe, Path: path}, start: time.Now()}
	tell(a.o.Queued, a.ev)
	return a
}

// abandoned tells that the acquisition failed with err.
func (a acquiring) abandoned(err error) {
	if a.o == nil {
		return
	}
	ev := a.ev
	ev.Wait, ev.Err = time.Since(a.start), err
	tell(a.o.Abandoned, ev)
}

// granted tells that the acquisition holds the node p (ahead and token as
// HoldEvent says) and returns the holding of p (see holdNode), whose end,
// Released or Lost, is told in turn.
func (a acquiring) granted(s *Session, p string, ahead int, token int64) *nodeHold {
	if a.o == nil {
		return s.holdNode(p)
	}
	ev := a.ev
	ev.Node, ev.Ahead, ev.Token, ev.Wait = p, ahead, token, time.Since(a.start)
	// Granted first: a session already over loses the holding at once,
	// and its Lost must come after.
	tell(a.o.Granted, ev)
	return s.holdNodeTold(p, &ev)
}
