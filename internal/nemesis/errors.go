package nemesis

import (
	"context"
	"errors"
	"strings"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The kinds of error a fault may cause, as Classify names them.
const (
	ErrKindSessionExpired     = "session-expired"
	ErrKindSessionClosed      = "session-closed"
	ErrKindConnectionLoss     = "connection-loss"
	ErrKindReleaseUnconfirmed = "release-unconfirmed"
	ErrKindWriteUnconfirmed   = "write-unconfirmed"
	ErrKindNodeLost           = "node-lost"
	ErrKindLocked             = "locked"
	ErrKindDeadline           = "deadline"
	ErrKindCanceled           = "canceled"
	ErrKindCloseUnconfirmed   = "close-unconfirmed"
	ErrKindNoServer           = "no-server"
)

// errorKinds are the documented sentinels, in the order Classify tries them
// (an error joined from two, as a failed release after a failed acquire,
// is named by the first that matches).
var errorKinds = []struct {
	name string
	err  error
}{
	{ErrKindWriteUnconfirmed, zkrecipes.ErrWriteUnconfirmed}, // first: it wraps its cause (a connection loss, an expiry, a deadline)
	{ErrKindSessionExpired, zkrecipes.ErrSessionExpired},
	{ErrKindSessionClosed, zkrecipes.ErrSessionClosed},
	{ErrKindReleaseUnconfirmed, zkrecipes.ErrReleaseUnconfirmed},
	{ErrKindNodeLost, zkrecipes.ErrNodeLost},
	{ErrKindLocked, zkrecipes.ErrLocked},
	{ErrKindConnectionLoss, zkrecipes.ErrConnectionLoss},
	{ErrKindDeadline, context.DeadlineExceeded},
	{ErrKindCanceled, context.Canceled},
	{ErrKindCloseUnconfirmed, zkclient.ErrCloseUnconfirmed},
	{ErrKindNoServer, zkclient.ErrNoServer},
}

// Classify names the documented kind err is (with errors.Is), or returns
// "" for an error of no kind a fault may cause: that is a violation,
// including the recipes' documented errors of misuse (ErrBusy, ErrNotHeld,
// ErrInvalidPath, ...), which a correct workload never meets, and any
// ZooKeeper error code that leaks through (session moved, ...).
func Classify(err error) string {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return ""
}

// Allowed reports whether an error of kind may come out of op: ErrLocked
// only from a try operation, an unconfirmed close only from closing a
// session, no reachable server only from making one, a Cache's end only
// from its session's; the other kinds from any call.
func Allowed(op, kind string) bool {
	switch op {
	case OpNodeRun:
		// Recorded only when a PersistentNode stopped keeping its node
		// for another reason than the close of the session it was made
		// on: its renewal covers expiries.
		return false
	case OpCacheNext:
		return kind == ErrKindSessionExpired || kind == ErrKindSessionClosed
	}
	switch kind {
	case "":
		return false
	case ErrKindLocked:
		return strings.Contains(op, ".try")
	case ErrKindCloseUnconfirmed:
		return op == OpSessionClose
	case ErrKindNoServer:
		return op == OpSessionNew
	}
	return true
}

// The operations a workload records.
const (
	OpMutexLock    = "mutex.lock"
	OpMutexTryLock = "mutex.trylock"
	OpMutexRequeue = "mutex.requeue"
	OpMutexUnlock  = "mutex.unlock"
	OpRWRLock      = "rw.rlock"
	OpRWTryRLock   = "rw.tryrlock"
	OpRWLock       = "rw.lock"
	OpRWTryLock    = "rw.trylock"
	OpRWRUnlock    = "rw.runlock"
	OpRWUnlock     = "rw.unlock"
	OpCampaign     = "election.campaign"
	OpResign       = "election.resign"
	OpAcquire      = "semaphore.acquire"
	OpTryAcquire   = "semaphore.tryacquire"
	OpRelease      = "semaphore.release"
	OpMultiLock    = "multilock.lock"
	OpMultiTryLock = "multilock.trylock"
	OpMultiUnlock  = "multilock.unlock"
	OpCacheNew     = "cache.new"
	OpCacheNext    = "cache.next" // the cache stopped on its own: why
	OpTreeCreate   = "tree.create"
	OpTreeSet      = "tree.set"
	OpTreeDelete   = "tree.delete"
	OpNodeCreate   = "pnode.create"
	OpNodeSetData  = "pnode.setdata"
	OpNodeDelete   = "pnode.delete" // another client's PersistentNode deleted
	OpNodeRun      = "pnode.run"    // the PersistentNode stopped keeping its node before Close: why
	OpNodeClose    = "pnode.close"
	OpAtomicAdd    = "atomiclong.add"
	OpSharedAdd    = "sharedcount.add" // Count, then TrySetCount until one applies
	OpOffer        = "queue.offer"
	OpTake         = "queue.take"
	OpPoll         = "queue.poll"
	OpLQOffer      = "lqueue.offer"
	OpLQTake       = "lqueue.take"
	OpLQConsume    = "lqueue.consume"
	OpLQRelease    = "lqueue.release"
	OpSessionNew   = "session.new"
	OpSessionClose = "session.close"
	OpOrphanCheck  = "nemesis.orphan-check" // the workload's own look for nodes left behind
)
