package zkrecipes

import (
	"context"
	"errors"
	"sync"
)

// ErrStreamClosed is what Next returns once the stream's own Close was
// called: a [Stream]'s, a [Cache]'s or a [SessionStates]'.
var ErrStreamClosed = errors.New("zkrecipes: stream closed")

// Stream follows the state of something watched on ZooKeeper: the leader
// of an election ([Election.Observe]), the members of a group
// ([WatchGroup]), the instances of a service ([Discovery.Watch]), a shared
// count ([SharedCount.Watch]).
//
// It holds the latest state only. The first Next returns the state read
// when the watch was set; each later Next returns the state as it is after
// the changes made since the previous Next returned, waiting for one if
// there was none. A slow reader therefore never works through a backlog:
// the changes made between two calls are merged into the state they led
// to, and a change undone before Next sees it is not reported at all. Each
// stream's doc says what counts as a change.
//
// The stream ends when the session is over, when a ZooKeeper error stops
// the watch (the node's ACL refusing the session, say), or at Close. Once
// it has ended, Next returns the state not yet returned, if there is one,
// and then, at every call, the reason: an error wrapping
// [ErrSessionExpired] or [ErrSessionClosed], the server's error, or
// [ErrStreamClosed].
//
// A Stream costs its watches on the server and one goroutine until it
// ends: Close it when done. Next is meant for one reader; Close may be
// called from any goroutine.
type Stream[T any] struct {
	same func(a, b T) bool
	stop context.CancelFunc
	done chan struct{} // closed when the producer returned

	mu      sync.Mutex
	wake    chan struct{} // closed (and replaced) when there is news for Next
	val     T             // the latest state
	gen     uint64        // its generation (see emit)
	fresh   bool          // val is not yet returned by Next
	taken   bool          // Next returned a state: seen and seenGen are set
	seen    T             // the state Next returned last
	seenGen uint64
	err     error // why the stream ended; nil while it runs
}

// newStream returns a stream whose state is first, the state read when
// the watch was set. same tells whether two states are the same (a state
// the reader has already seen is not reported again).
func newStream[T any](first T, same func(a, b T) bool) *Stream[T] {
	return &Stream[T]{same: same, wake: make(chan struct{}), val: first, fresh: true}
}

// run runs produce in its own goroutine until it returns or Close is
// called; produce calls emit with each new state. What produce returns
// ends the stream, wrapped in what (as "watch group /g"), unless the
// session is over: its error is then the reason.
func (st *Stream[T]) run(s *Session, what string, produce func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	st.stop, st.done = cancel, make(chan struct{})
	go func() {
		defer close(st.done)
		err := produce(ctx)
		switch {
		case ctx.Err() != nil:
			err = ErrStreamClosed
		case s.Err() != nil:
			err = s.Err()
		}
		if !errors.Is(err, ErrStreamClosed) {
			err = errorf("%s: %w", what, err)
		}
		st.end(err)
	}()
}

// emit records v as the current state. gen is the producer's generation
// of it: a state equal to the one Next returned last (by same) is news
// only if its generation differs (a new leadership with the same leader
// value, say).
func (st *Stream[T]) emit(v T, gen uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return
	}
	st.val, st.gen = v, gen
	st.fresh = !st.taken || gen != st.seenGen || !st.same(v, st.seen)
	if st.fresh {
		st.wakeLocked()
	}
}

// end ends the stream with err, unless it has ended already.
func (st *Stream[T]) end(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
		st.wakeLocked()
	}
}

func (st *Stream[T]) wakeLocked() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// Next returns the state after the changes made since the previous Next
// returned, waiting for a change while ctx allows (when ctx ends first it
// returns ctx's error, and the stream goes on). The first Next returns the
// state read when the watch was set. Once the stream has ended, Next
// returns why (see [Stream]).
func (st *Stream[T]) Next(ctx context.Context) (T, error) {
	for {
		st.mu.Lock()
		if st.fresh {
			v := st.val
			st.fresh, st.taken = false, true
			st.seen, st.seenGen = v, st.gen
			st.mu.Unlock()
			return v, nil
		}
		err, wake := st.err, st.wake
		st.mu.Unlock()
		var zero T
		if err != nil {
			return zero, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// Close ends the stream, if it has not ended already, and releases its
// goroutine and watches; a Next waiting meanwhile returns
// [ErrStreamClosed]. It returns when the watching goroutine has returned.
// Calling it again does nothing.
func (st *Stream[T]) Close() {
	st.stop()
	<-st.done
	st.end(ErrStreamClosed) // produce may not have seen the cancel
}
