package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// MultiLock is several Mutexes taken as one, all or none, like Apache
// Curator's InterProcessMultiLock: each path is an ordinary Mutex (nodes
// "_c_<uuid>-lock-<seq>"), so Go and Java processes, and plain Mutexes,
// contend on the same paths.
//
// The locks are always taken in one fixed order, their paths sorted
// bytewise, whatever order they were given in: two MultiLocks (or a
// MultiLock and a Mutex) that share paths cannot deadlock, since neither
// can wait for a lock while holding one the other needs, being further in
// that order. Curator takes its paths in the order it is given: processes
// that mix the two must give Curator the same sorted list (Paths).
//
// A MultiLock value is one contender: it holds its locks at most once at a
// time. Its methods are safe to call concurrently (a second Lock returns
// ErrBusy). Holding costs what each Mutex costs, and one goroutine per path
// to watch for loss.
type MultiLock struct {
	paths []string // sorted, distinct
	locks []*Mutex // one per path, in that order
	s     *Session
	err   error // invalid paths, reported by every call

	mu   sync.Mutex
	busy bool          // acquiring or holding
	held bool          // every lock is held
	lost chan struct{} // closed when the holding is void
	stop func()        // stops watching for loss and closes lost
}

// NewMultiLock returns a MultiLock on paths for the session s. Paths given
// more than once count once. Options apply to every path's node
// (WithNodeData). A bad path, or no path at all, is reported without any
// network call by the first Lock, TryLock or Unlock.
func NewMultiLock(s *Session, paths []string, opts ...LockOption) *MultiLock {
	ps := slices.Compact(slices.Sorted(slices.Values(paths)))
	m := &MultiLock{paths: ps, s: s}
	for _, p := range ps {
		if err := checkPath(p); err != nil {
			m.err = err
			break
		}
		m.locks = append(m.locks, NewMutex(s, p, opts...))
	}
	if len(ps) == 0 {
		m.err = fmt.Errorf("%w: a multilock needs at least one path", ErrInvalidArgument)
	}
	return m
}

// Paths returns the paths in the order they are taken.
func (m *MultiLock) Paths() []string { return slices.Clone(m.paths) }

// Lock takes every lock, one after the other in the order of Paths, and
// returns when all are held, ctx ends, or the session is over. When it
// returns an error, no lock of this MultiLock is held and none of its
// nodes is left: the locks taken so far are released (their nodes deleted
// even if ctx was cancelled).
func (m *MultiLock) Lock(ctx context.Context) error { return m.acquire(ctx, false, "lock") }

// TryLock takes every lock if none is held or waited for by anybody else,
// and returns an error wrapping ErrLocked otherwise, without waiting and
// leaving no node behind.
func (m *MultiLock) TryLock(ctx context.Context) error { return m.acquire(ctx, true, "trylock") }

func (m *MultiLock) acquire(ctx context.Context, try bool, op string) error {
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	if m.busy {
		m.mu.Unlock()
		return errorf("%s %v: %w", op, m.paths, ErrBusy)
	}
	m.busy = true
	m.mu.Unlock()

	for i, l := range m.locks {
		var err error
		if try {
			err = l.TryLock(ctx)
		} else {
			err = l.Lock(ctx)
		}
		if err != nil {
			errs := []error{err}
			for _, taken := range slices.Backward(m.locks[:i]) {
				// After the session ended its nodes are gone: nothing
				// more to report than err.
				if err := taken.Unlock(ctx); err != nil && m.s.Err() == nil {
					errs = append(errs, err)
				}
			}
			m.mu.Lock()
			m.busy = false
			m.mu.Unlock()
			return errors.Join(errs...)
		}
	}
	chs := make([]<-chan struct{}, len(m.locks))
	for i, l := range m.locks {
		chs[i] = l.Lost()
	}
	lost, stop := anyClosed(chs)
	m.mu.Lock()
	m.held, m.lost, m.stop = true, lost, stop
	m.mu.Unlock()
	return nil
}

// Unlock releases every lock, in the reverse of the order they were taken;
// Lost is closed first. Each release is attempted even if ctx is already
// cancelled or another failed; the errors are joined (see Mutex.Unlock for
// each). It returns an error wrapping ErrNotHeld if the locks are not held.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	if !m.held {
		m.mu.Unlock()
		return errorf("unlock %v: %w", m.paths, ErrNotHeld)
	}
	m.held = false
	stop := m.stop
	m.mu.Unlock()

	stop()
	var errs []error
	for _, l := range slices.Backward(m.locks) {
		if err := l.Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	m.busy = false
	m.mu.Unlock()
	return errors.Join(errs...)
}

// Lost returns a channel that is closed when the holding is void: when any
// of the locks is lost (see Mutex.Lost), or by Unlock. A lock lost while
// Lock waited for a later one (its node deleted, its session ending or
// closing) is void when Lock returns: Lost is closed already. When the
// locks are not held it returns a closed channel.
func (m *MultiLock) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return m.lost
}

// Token returns the fencing token of the lock on path (see Mutex.Token), or
// 0 when it is not held or path is not one of the MultiLock's.
func (m *MultiLock) Token(path string) int64 {
	i, ok := slices.BinarySearch(m.paths, path)
	if !ok || i >= len(m.locks) {
		return 0
	}
	return m.locks[i].Token()
}

// anyClosed returns a channel closed as soon as any of chs is closed, or
// when stop is called; stop also ends the goroutines (one per channel)
// that watch them, and is idempotent. If one of chs is closed already, so
// is the channel returned: a lock lost while the MultiLock waited for a
// later one (a node deleted, or every holding voided when the session
// ends or its Close begins, which a grant can outrun) is lost when Lock
// returns, as a Mutex's holding void at its grant is, not a moment later,
// when a goroutine has run.
func anyClosed(chs []<-chan struct{}) (lost chan struct{}, stop func()) {
	lost = make(chan struct{})
	for _, ch := range chs {
		select {
		case <-ch:
			close(lost)
			return lost, func() {}
		default:
		}
	}
	quit := make(chan struct{})
	var closeLost, closeQuit sync.Once
	var wg sync.WaitGroup
	for _, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ch:
				closeLost.Do(func() { close(lost) })
			case <-quit:
			}
		}()
	}
	return lost, func() {
		closeQuit.Do(func() { close(quit) })
		wg.Wait()
		closeLost.Do(func() { close(lost) })
	}
}
