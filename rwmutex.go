package zkrecipes

import (
	"context"
	"fmt"
	"sync"
)

// Node name markers of the read/write lock: Curator's
// InterProcessReadWriteLock ("_c_<uuid>-__READ__<seq>",
// "_c_<uuid>-__WRIT__<seq>") and kazoo's ReadLock and WriteLock
// ("<id>__rlock__<seq>", "<id>__lock__<seq>").
var (
	readerKind = kind{marker: "__READ__", reader: true}
	writerKind = kind{marker: "__WRIT__"}
	rwKinds    = []kind{readerKind, writerKind, {"__rlock__", true}, {"__lock__", false}}
)

// RWMutex is a distributed reader/writer lock on a ZooKeeper path, compatible
// with Apache Curator's InterProcessReadWriteLock and counting kazoo's
// ReadLock and WriteLock nodes as readers and writers.
//
// Readers and writers share one queue in arrival order. A writer holds when
// nobody arrived before it; a reader holds when no writer arrived before it,
// so any number of readers hold together, and a writer is never starved by
// readers arriving after it: they queue behind it. A writer waits on its
// immediate predecessor; a reader waits on the nearest writer before it, so a
// writer's release wakes exactly the readers that then hold (Curator's
// readers all watch the first writer instead, and wake for nothing when they
// are queued behind a later one).
//
// An RWMutex value is one contender: it holds the read lock or the write
// lock, at most once at a time, and is not reentrant. Use one value per
// goroutine that competes. Its methods are safe to call concurrently.
//
// There is no upgrade: Lock on a value that holds the read lock returns an
// error wrapping ErrUpgrade (the write lock would wait for that read lock).
// Another value of the same process would not see the danger and would wait
// forever; release the read lock first. There is no downgrade either: RLock
// on a value that holds the write lock returns ErrBusy. A ZooKeeper node
// cannot change from writer to reader in place, and a new reader node would
// queue behind any writer already waiting; granting it anyway (as Curator
// does for the thread holding its write lock) would let that waiting writer
// in beside the reader as soon as the write lock is released. Unlock, then
// RLock: another writer may hold in between.
type RWMutex struct {
	q   queue
	err error // invalid path, reported by every call

	mu      sync.Mutex
	busy    bool // acquiring or holding
	reader  bool // what is held or being acquired
	held    *ticket
	lost    <-chan struct{}
	release func()
}

// NewRWMutex returns an RWMutex on path for the session s. A bad path is
// reported, without any network call, by the first call.
func NewRWMutex(s *Session, path string) *RWMutex {
	return &RWMutex{q: queue{s: s, dir: path, kinds: rwKinds}, err: checkPath(path)}
}

// RLock waits until this contender holds the read lock: until no writer that
// arrived before it remains, ctx ends, or the session is over. When it returns
// an error, this contender has left the queue: its node is deleted even if
// ctx was cancelled.
func (m *RWMutex) RLock(ctx context.Context) error { return m.lock(ctx, true) }

// Lock waits until this contender holds the write lock: until everybody who
// arrived before it has left, ctx ends, or the session is over. When it
// returns an error, this contender has left the queue.
func (m *RWMutex) Lock(ctx context.Context) error { return m.lock(ctx, false) }

func (m *RWMutex) lock(ctx context.Context, reader bool) error {
	op := opName(reader, "lock")
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	switch {
	case m.held != nil && m.reader && !reader:
		m.mu.Unlock()
		return fmt.Errorf("zkrecipes: lock %s: %w", m.q.dir, ErrUpgrade)
	case m.held != nil && !m.reader && reader:
		m.mu.Unlock()
		return fmt.Errorf("zkrecipes: rlock %s: %w: the write lock is held and cannot be downgraded (Unlock, then RLock)", m.q.dir, ErrBusy)
	case m.busy:
		m.mu.Unlock()
		return fmt.Errorf("zkrecipes: %s %s: %w", op, m.q.dir, ErrBusy)
	}
	m.busy, m.reader = true, reader
	m.mu.Unlock()

	k := writerKind
	if reader {
		k = readerKind
	}
	t, err := m.q.enter(ctx, k, nil)
	if err == nil {
		if err = t.wait(ctx, false); err != nil {
			t.leave(ctx)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.busy = false
		return fmt.Errorf("zkrecipes: %s %s: %w", op, m.q.dir, err)
	}
	m.held = t
	m.lost, m.release = m.q.s.hold()
	return nil
}

// RUnlock releases the read lock by deleting this contender's node, even if
// ctx is already cancelled. It returns an error wrapping ErrNotHeld if this
// value does not hold the read lock, and one wrapping ErrSessionExpired if
// the session expired meanwhile (the lock was lost, not released).
func (m *RWMutex) RUnlock(ctx context.Context) error { return m.unlock(ctx, true) }

// Unlock releases the write lock, like RUnlock releases the read lock.
func (m *RWMutex) Unlock(ctx context.Context) error { return m.unlock(ctx, false) }

func (m *RWMutex) unlock(ctx context.Context, reader bool) error {
	op := opName(reader, "unlock")
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	t, release := m.held, m.release
	if t == nil || m.reader != reader {
		what := "nothing"
		if t != nil {
			what = "the " + opName(m.reader, "lock") + " side"
		}
		m.mu.Unlock()
		return fmt.Errorf("zkrecipes: %s %s: %w (this value holds %s)", op, m.q.dir, ErrNotHeld, what)
	}
	m.held, m.release, m.busy = nil, nil, false
	m.mu.Unlock()

	release()
	if err := t.leave(ctx); err != nil {
		return fmt.Errorf("zkrecipes: %s %s: %w", op, m.q.dir, err)
	}
	return nil
}

// Token returns the fencing token of the current holding, or 0 when nothing
// is held: the zxid that created this contender's node. A write holder's
// token is above the token of every holder, reader or writer, before it, and
// a read holder's is above that of every writer before it, so a resource
// guarded by the lock can refuse writes carrying a token below the highest
// it has seen (see Mutex.Token).
func (m *RWMutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		return 0
	}
	return m.held.token
}

// Lost returns a channel that is closed when the current holding, read or
// write, is void: the session expired or was closed, or (in strict mode, see
// WithStrict) the connection was down long enough that it may have expired.
// When nothing is held it returns a closed channel.
func (m *RWMutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return m.lost
}

// opName names the read ("r"-prefixed) or write side of an operation.
func opName(reader bool, op string) string {
	if reader {
		return "r" + op
	}
	return op
}
