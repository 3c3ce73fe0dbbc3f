package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Mutex is a distributed exclusive lock on a ZooKeeper path, compatible with
// Apache Curator's InterProcessMutex (nodes "_c_<uuid>-lock-<seq>") and
// counting kazoo's Lock nodes ("<id>__lock__<seq>") as contenders.
//
// Each Lock queues an ephemeral sequential node under the path; the lowest
// holds the lock, and every waiter watches only the node just before its own,
// so one release wakes exactly one waiter however long the queue.
//
// A Mutex value is one contender: it holds the lock at most once at a time
// and is not reentrant. Use one Mutex per goroutine that competes. Its
// methods are safe to call concurrently (a second Lock returns ErrBusy).
type Mutex struct {
	q   queue
	err error // invalid path, reported by every call

	mu      sync.Mutex
	busy    bool
	held    *ticket
	lost    <-chan struct{}
	release func()
}

// NewMutex returns a Mutex on path for the session s. A bad path is
// reported, without any network call, by the first Lock, TryLock or Unlock.
func NewMutex(s *Session, path string) *Mutex {
	return &Mutex{q: queue{s: s, dir: path, kinds: mutexKinds}, err: checkPath(path)}
}

// Lock waits until this contender holds the lock, ctx ends, or the session
// is over. When it returns an error, this contender has left the queue: its
// node is deleted even if ctx was cancelled.
func (m *Mutex) Lock(ctx context.Context) error {
	return m.lock(ctx, false)
}

// TryLock takes the lock if nobody holds or waits for it, and returns
// ErrLocked otherwise, without waiting and without leaving a node behind.
func (m *Mutex) TryLock(ctx context.Context) error {
	return m.lock(ctx, true)
}

func (m *Mutex) lock(ctx context.Context, try bool) error {
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	if m.busy {
		m.mu.Unlock()
		return fmt.Errorf("%w: lock %s", ErrBusy, m.q.dir)
	}
	m.busy = true
	m.mu.Unlock()

	t, err := m.acquire(ctx, try)

	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.busy = false
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("lock %s: %w", m.q.dir, err)
		}
		return fmt.Errorf("zkrecipes: lock %s: %w", m.q.dir, err)
	}
	m.held = t
	m.lost, m.release = m.q.s.hold()
	return nil
}

func (m *Mutex) acquire(ctx context.Context, try bool) (*ticket, error) {
	if try {
		// Anyone queued means the lock is taken: answer without a write.
		cs, err := m.q.contenders(ctx)
		if err == nil && len(cs) > 0 {
			return nil, ErrLocked
		}
	}
	t, err := m.q.enter(ctx, kind{marker: "lock-"}, nil)
	if err != nil {
		return nil, err
	}
	if err := t.wait(ctx, try); err != nil {
		t.leave(ctx)
		return nil, err
	}
	return t, nil
}

// Unlock releases the lock by deleting this contender's node. The delete is
// attempted even if ctx is already cancelled. It returns an error wrapping
// ErrNotHeld if this Mutex does not hold the lock, and one wrapping
// ErrSessionExpired if the session expired meanwhile (the lock was lost, not
// released).
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	t, release := m.held, m.release
	if t == nil {
		m.mu.Unlock()
		return fmt.Errorf("zkrecipes: unlock %s: %w", m.q.dir, ErrNotHeld)
	}
	m.held, m.release, m.busy = nil, nil, false
	m.mu.Unlock()

	release()
	if err := t.leave(ctx); err != nil {
		return fmt.Errorf("zkrecipes: unlock %s: %w", m.q.dir, err)
	}
	return nil
}

// Token returns the fencing token of the current holding, or 0 when the lock
// is not held. Tokens strictly increase from one holder of the path to the
// next (a token is the zxid of the last change to the queue that the holder
// saw as it acquired), so a resource guarded by the lock can refuse any
// request carrying a token lower than the highest it has seen: a holder
// that lost the lock without knowing it cannot then overwrite its
// successor's work.
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		return 0
	}
	return m.held.token
}

// Lost returns a channel that is closed when the current holding is void:
// the session expired or was closed, or (in strict mode, see WithStrict) the
// connection was down long enough that it may have expired. When the lock is
// not held it returns a closed channel.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return m.lost
}
