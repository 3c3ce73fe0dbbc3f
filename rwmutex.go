package zkrecipes

import (
	"context"

	"github.com/zkrecipes/zkrecipes/zkclient"
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
	st seat
}

// NewRWMutex returns an RWMutex on path for the session s. A writer that
// releases hands the lock by grant to the writer right after it, or to
// the readers right after it, all at once, if they take grants (see
// WithGrants); a reader grants nothing. A bad path is reported, without
// any network call, by the first call.
func NewRWMutex(s *Session, path string, opts ...LockOption) *RWMutex {
	m := &RWMutex{}
	m.st.init(s, path, lockKinds, opts)
	return m
}

// RLock waits until this contender holds the read lock: until no writer that
// arrived before it remains, ctx ends, or the session is over. When it returns
// an error, this contender has left the queue: its node is deleted even if
// ctx was cancelled.
func (m *RWMutex) RLock(ctx context.Context) error {
	return m.st.acquire(ctx, readerKind, false, "rlock")
}

// TryRLock takes the read lock if no writer holds or waits for it, and
// returns an error wrapping ErrLocked otherwise, without waiting and
// without leaving a node behind.
func (m *RWMutex) TryRLock(ctx context.Context) error {
	return m.st.acquire(ctx, readerKind, true, "tryrlock")
}

// Lock waits until this contender holds the write lock: until everybody who
// arrived before it has left, ctx ends, or the session is over. When it
// returns an error, this contender has left the queue.
func (m *RWMutex) Lock(ctx context.Context) error {
	return m.st.acquire(ctx, writerKind, false, "lock")
}

// TryLock takes the write lock if nobody holds or waits for the lock, and
// returns an error wrapping ErrLocked otherwise, without waiting and
// without leaving a node behind.
func (m *RWMutex) TryLock(ctx context.Context) error {
	return m.st.acquire(ctx, writerKind, true, "trylock")
}

// RUnlock releases the read lock by deleting this contender's node, even if
// ctx is already cancelled. It returns an error wrapping ErrNotHeld if this
// value does not hold the read lock, and one wrapping ErrSessionExpired if
// the session expired meanwhile (the lock was lost, not released).
func (m *RWMutex) RUnlock(ctx context.Context) error { return m.st.leave(ctx, true, "runlock") }

// Unlock releases the write lock, like RUnlock releases the read lock.
func (m *RWMutex) Unlock(ctx context.Context) error { return m.st.leave(ctx, false, "unlock") }

// Token returns the fencing token of the current holding, or 0 when nothing
// is held (see Mutex.Token for what it is). A write holder's
// token is above the token of every holder, reader or writer, before it, and
// a read holder's is above that of every writer before it, so a resource
// guarded by the lock can refuse writes carrying a token below the highest
// it has seen (see Mutex.Token).
func (m *RWMutex) Token() int64 { return m.st.token() }

// Lost returns a channel that is closed when the current holding, read or
// write, is void: the session expired or was closed, the holder's node was
// deleted by someone else, or (in strict mode, see WithStrict) the
// connection was down long enough that the session may have expired. When
// nothing is held it returns a closed channel. As for Mutex, watching the
// node costs one getData per holding.
func (m *RWMutex) Lost() <-chan struct{} { return m.st.lostChan() }

// HeldOp returns a transaction operation that succeeds only while this
// value holds the read or write lock: it checks that the holder's node still exists, the
// equivalent of etcd's Mutex.IsOwner compare. A write made in the same
// Session.Multi is then applied only if the read or write lock is still held when the
// server applies it; otherwise the transaction fails (the check with
// zkclient.ErrNoNode) and nothing is written. When nothing is held, the
// transaction fails before it is sent, with an error wrapping ErrNotHeld.
// It costs no request of its own.
func (m *RWMutex) HeldOp() zkclient.Op { return m.st.heldOp() }
