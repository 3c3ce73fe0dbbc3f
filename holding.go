package zkrecipes

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

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
}

// holdNode registers a holding embodied by the node p and starts watching p.
func (s *Session) holdNode(p string) *nodeHold {
	lost, release := s.hold()
	ctx, cancel := context.WithCancel(context.Background())
	h := &nodeHold{s: s, lost: lost, release: release, cancel: cancel, done: make(chan struct{})}
	go h.watch(ctx, s, p)
	return h
}

func (h *nodeHold) watch(ctx context.Context, s *Session, p string) {
	defer close(h.done)
	for {
		_, w, err := s.getDataWCounted(ctx, p, &s.stats.holdWatches)
		if errors.Is(err, zkclient.ErrNoNode) {
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

// drop closes lost at once, for a holder about to delete the node itself:
// the watch stays until the deletion fires it. Follow with settle.
func (h *nodeHold) drop() {
	h.dropped.Store(true)
	h.release()
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
