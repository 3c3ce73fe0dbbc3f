package zkrecipes

import (
	"context"
	"sync"
)

// fifo is an unbounded first-in first-out queue with one reader, as the
// client keeps for its persistent watches: the producer never blocks and
// nothing is dropped; once closed, the reader drains what is queued and
// then gets the close error.
type fifo[T any] struct {
	mu     sync.Mutex
	items  []T
	ready  chan struct{} // closed (and replaced) when items arrive or the queue closes
	closed error
}

func newFIFO[T any]() *fifo[T] { return &fifo[T]{ready: make(chan struct{})} }

// push appends v, unless the queue is closed.
func (q *fifo[T]) push(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed == nil {
		q.items = append(q.items, v)
		q.wakeLocked()
	}
}

// close ends the queue with err after what is queued; later calls do nothing.
func (q *fifo[T]) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed == nil {
		q.closed = err
		q.wakeLocked()
	}
}

func (q *fifo[T]) wakeLocked() {
	close(q.ready)
	q.ready = make(chan struct{})
}

// next returns the oldest item, waiting for one while ctx allows; once the
// queue is closed and drained it returns the close error.
func (q *fifo[T]) next(ctx context.Context) (T, error) {
	var zero T
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			q.items[0] = zero
			q.items = q.items[1:]
			if len(q.items) == 0 {
				q.items = nil // let the array go
			}
			q.mu.Unlock()
			return v, nil
		}
		if err := q.closed; err != nil {
			q.mu.Unlock()
			return zero, err
		}
		ready := q.ready
		q.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// wait returns a channel that is closed once next can return at once.
func (q *fifo[T]) wait() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 || q.closed != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return q.ready
}
