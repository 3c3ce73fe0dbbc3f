package zkrecipes

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// nodeHold is a holding embodied by one node of this session (a leadership,
// a membership). Its lost channel closes when the session's holdings are
// void (see Session.hold) and also when the node is deleted, by whoever
// deletes it: a leader whose node an operator removed must not go on
// believing it leads. It costs one data watch and one goroutine.
type nodeHold struct {
	lost    <-chan struct{}
	release func()
	cancel  context.CancelFunc
	done    chan struct{}
}

// holdNode registers a holding embodied by the node p and starts watching p.
func (s *Session) holdNode(p string) *nodeHold {
	lost, release := s.hold()
	ctx, cancel := context.WithCancel(context.Background())
	h := &nodeHold{lost: lost, release: release, cancel: cancel, done: make(chan struct{})}
	go h.watch(ctx, s, p)
	return h
}

func (h *nodeHold) watch(ctx context.Context, s *Session, p string) {
	defer close(h.done)
	for {
		_, w, err := s.getDataW(ctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			h.release()
			return
		}
		if err != nil {
			return // end was called, or the session is over (which voided the holding)
		}
		select {
		case ev := <-w.event():
			if ev.Type == zkclient.EventNodeDeleted {
				h.release()
				return
			}
			// Data changed: look again (NotWatching: the session is
			// over, and the next call says so).
		case <-h.lost:
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
