package zkclient

import (
	"context"
	"sync"
)

// stream is an unbounded first-in first-out queue with one reader: the
// producer never blocks and nothing is dropped; once closed, the reader
// drains what is queued and then gets the close error.
type stream[T any] struct {
	mu     sync.Mutex
	items  []T
	ready  chan struct{} // closed (and replaced) when items arrive or the stream closes
	closed error
}

func newStream[T any]() *stream[T] { return &stream[T]{ready: make(chan struct{})} }

// push appends v; it reports false if the stream was closed.
func (s *stream[T]) push(v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return false
	}
	s.items = append(s.items, v)
	s.wakeLocked()
	return true
}

// close ends the stream with err after what is queued.
func (s *stream[T]) close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = err
		s.wakeLocked()
	}
}

func (s *stream[T]) wakeLocked() {
	close(s.ready)
	s.ready = make(chan struct{})
}

// next returns the oldest item, waiting for one while ctx allows. After
// close, once drained, it returns the close error.
func (s *stream[T]) next(ctx context.Context) (T, error) {
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

// wait returns a channel closed when an item or the close is there to be
// read by next (it may be closed already).
func (s *stream[T]) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) > 0 || s.closed != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return s.ready
}
