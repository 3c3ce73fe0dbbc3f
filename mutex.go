package zkrecipes

import (
	"context"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Mutex is a distributed exclusive lock on a ZooKeeper path, compatible with
// Apache Curator's InterProcessMutex (nodes "_c_<uuid>-lock-<seq>") and
// counting kazoo's Lock nodes ("<id>__lock__<seq>") as contenders. On one
// path, a Mutex also excludes the readers and writers of an RWMutex: its
// node counts as a writer there.
//
// Each Lock queues an ephemeral sequential node under the path; the lowest
// holds the lock, and every waiter watches only the node just before its own,
// so one release wakes exactly one waiter however long the queue. Once its
// session has had to wait on the path, a release also hands the lock to
// the next waiter by grant, and that waiter then holds without reading
// the queue (see WithGrants for the details and costs; WithoutGrants turns
// it off).
//
// A Mutex value is one contender: it holds the lock at most once at a time
// and is not reentrant. Use one Mutex per goroutine that competes. Its
// methods are safe to call concurrently (a second Lock returns ErrBusy).
type Mutex struct {
	st seat
}

// NewMutex returns a Mutex on path for the session s. A bad path is
// reported, without any network call, by the first Lock, TryLock or Unlock.
func NewMutex(s *Session, path string, opts ...LockOption) *Mutex {
	m := &Mutex{}
	m.st.init(s, path, lockKinds, opts)
	return m
}

// Lock waits until this contender holds the lock, ctx ends, or the session
// is over. When it returns an error, this contender has left the queue: its
// node is deleted even if ctx was cancelled.
func (m *Mutex) Lock(ctx context.Context) error {
	return m.st.acquire(ctx, mutexKind, false, "lock")
}

// TryLock takes the lock if nobody holds or waits for it, and returns an
// error wrapping ErrLocked otherwise, without waiting and without leaving a
// node behind. When the lock is taken it answers with one read, no write.
func (m *Mutex) TryLock(ctx context.Context) error {
	return m.st.acquire(ctx, mutexKind, true, "trylock")
}

// Unlock releases the lock by deleting this contender's node. The delete is
// attempted even if ctx is already cancelled, and retried across connection
// loss for up to the session timeout; if it cannot be confirmed by then,
// Unlock returns the error and the node goes when the session ends. It
// returns an error wrapping ErrNotHeld if this Mutex does not hold the
// lock, and one wrapping ErrSessionExpired if the session expired meanwhile
// (the lock was lost, not released).
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.st.leave(ctx, false, "unlock")
}

// Requeue releases the lock and queues for it again at the back, then waits
// until it holds it again: Unlock followed by Lock, with the delete and the
// create done in one multi — one write, one disk sync on the server, instead
// of two. It suits workers that take turns on a lock in a loop. The old
// holding ends (its Lost channel closes) before the new one starts, and the
// new one has a new, higher Token. It returns an error wrapping ErrNotHeld
// if the lock is not held; on any other error this contender has left the
// queue, as after a failed Lock.
func (m *Mutex) Requeue(ctx context.Context) error {
	return m.st.requeue(ctx, "requeue")
}

// Token returns the fencing token of the current holding, or 0 when the lock
// is not held. Tokens strictly increase from one holder of the path to the
// next, also across a deletion and re-creation of the path: a token is the
// zxid that created the holder's node, and the node of every holder before
// it was ahead of it in the line, so created earlier. A resource guarded
// by the lock can refuse any request carrying a token lower than the
// highest it has seen: a holder that lost the lock without knowing it
// cannot then overwrite its successor's work. Reading the token costs no
// request.
func (m *Mutex) Token() int64 { return m.st.token() }

// Lost returns a channel that is closed when the current holding is void:
// the session expired or was closed, the holder's node was deleted by
// someone else (an operator, a cleanup script), or (in strict mode, see
// WithStrict) the connection was down long enough that the session may
// have expired. Unlock closes it too. When the lock is not held it returns
// a closed channel. Noticing a deletion costs one getData with a watch per
// holding (Stats.HoldWatches), sent after Lock returns.
func (m *Mutex) Lost() <-chan struct{} { return m.st.lostChan() }

// HeldOp returns a transaction operation that succeeds only while this
// value holds the lock: it checks that the holder's node still exists, the
// equivalent of etcd's Mutex.IsOwner compare. A write made in the same
// Session.Multi is then applied only if the lock is still held when the
// server applies it; otherwise the transaction fails (the check with
// zkclient.ErrNoNode) and nothing is written. When nothing is held, the
// transaction fails before it is sent, with an error wrapping ErrNotHeld.
// It costs no request of its own.
func (m *Mutex) HeldOp() zkclient.Op { return m.st.heldOp() }
