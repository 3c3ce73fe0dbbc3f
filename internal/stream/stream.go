// Package stream provides an unbounded first-in first-out queue with one
// reader, for event streams that must never block their producer nor drop
// an event: watch events, session states, cache changes.
package stream

import (
	"context"
	"sync"
)

// Queue is an unbounded first-in first-out queue with one reader: the
// producers never block and nothing is dropped; once closed, the reader
// drains what is queued and then gets the close error. Its memory grows
// with what is queued and unread.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	ready  chan struct{} // closed (and replaced) when items arrive or the stream closes
	closed error
}

// New returns an empty, open Queue.
func New[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{})} }

// Push appends v; it reports false if the stream was closed.
func (s *Queue[T]) Push(v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return false
	}
	s.items = append(s.items, v)
	s.wakeLocked()
	return true
}

// Len returns the number of items queued and not yet read.
func (s *Queue[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Close ends the stream with err after what is queued.
func (s *Queue[T]) Close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = err
		s.wakeLocked()
	}
}

func (s *Queue[T]) wakeLocked() {
	close(s.ready)
	s.ready = make(chan struct{})
}

// Next returns the oldest item, waiting for one while ctx allows. After
// Close, once drained, it returns the close error.
func (s *Queue[T]) Next(ctx context.Context) (T, error) {
	for {
		s.mu.Lock()
		if len(s.items) > 0 {
			v := s.items[0]
			var zero T
			s.items[0] = zero
			s.items = s.items[1:]
			if len(s.items) == 0 {
				s.items = nil
			}
			s.mu.Unlock()
			return v, nil
		}
		if err := s.closed; err != nil {
			s.mu.Unlock()
			var zero T
			return zero, err
		}
		ready := s.ready
		s.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// Ready returns a channel closed when an item or the close is there to be
// read by Next (it may be closed already).
func (s *Queue[T]) Ready() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) > 0 || s.closed != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return s.ready
}
