package zkrecipes

import (
	"context"
	"time"
)

// Observer is told of the life of each holder of the Session's recipes,
// and of the items of its queues and the resynchronizations of its
// caches, for metrics and tracing. Every field is optional: a nil func is
// not called.
//
// A holder is a contender of a Mutex ("mutex"), an RWMutex ("read",
// "write") or an Election ("election"), a Semaphore lease ("semaphore"),
// an item taken from a LockingQueue ("lqueue"), a Group membership
// ("member") or a Discovery registration ("registration"): HoldEvent's
// Recipe says which. Each acquisition (Lock, Campaign, Acquire, Take,
// JoinGroup, Register, ...) is told as Queued, then exactly one of Granted
// or Abandoned; each grant is then ended by exactly one of Released
// (Unlock, Resign, Lease.Release, QueueItem.Release or Consume, Leave,
// Unregister) or Lost (a holding lost and then released is told as Lost
// only). A Requeue is a Released, then a new Queued. A MultiLock is told
// as its mutexes.
//
// Offered and Taken count the items of a Queue ("queue") and a
// LockingQueue ("lqueue") that Offer added and Take or Poll took, once
// each, when the call succeeds (an item a lost connection left in doubt,
// ErrWriteUnconfirmed, is not told). Resynced is told each time a Cache
// read its whole tree again after a reconnection or a lost connection,
// since the server does not replay the changes made meanwhile.
//
// The funcs are called synchronously: Queued, Granted, Abandoned,
// Released, Offered and Taken on the goroutine of the call that caused
// them (Lock, Unlock, Acquire, Offer, ...); Resynced on the Cache's
// goroutine; Lost at the moment the holding's Lost channel closes, on
// the goroutine that voids the session's holdings (the client's, under its
// lock, when the session ends; strict mode's timer; Close's caller) under
// the Session's lock, or on the goroutine that watches the holding's node
// when someone else deletes it. They may be called concurrently: they must
// be safe for concurrent use, return quickly, never block, and never call
// the Session or its client.
//
// Like zkclient.Observer, it is a struct of funcs rather than an
// interface, so that an adapter sets only the events it wants and events
// can be added without breaking it.
type Observer struct {
	Queued    func(HoldEvent)
	Granted   func(HoldEvent) // Wait and Token are set
	Abandoned func(HoldEvent) // Wait and Err are set: the acquisition failed (ErrLocked, ctx, session)
	Released  func(HoldEvent) // Held is set; Err wraps ErrReleaseUnconfirmed if the release was not confirmed
	Lost      func(HoldEvent) // Held and Reason are set

	Offered  func(ItemEvent)   // an item was added to a queue
	Taken    func(ItemEvent)   // an item was taken from a queue; Wait is set
	Resynced func(ResyncEvent) // a Cache read its whole tree again
}

// HoldEvent is one step of a contender's life, for Observer.
//
// Context is the context given to the call that began the acquisition
// (Lock, Campaign, ...), on every event of that acquisition and of the
// holding it granted, so that a tracing adapter can make the span of the
// wait a child of the caller's span. An event told after the call returned
// (Released, Lost) may carry a context that is done by then: use its
// values, not its deadline. Wait and Held let an adapter give a span its
// true start without keeping state between events.
type HoldEvent struct {
	Context context.Context
	Recipe  string        // "mutex", "read", "write", "election", "semaphore", "lqueue", "member", "registration"
	Path    string        // the recipe's path
	Node    string        // the contender's node, once queued (Granted, Released, Lost)
	Ahead   int           // contenders queued before it when it first looked (Granted and after)
	Wait    time.Duration // from Queued to Granted or Abandoned
	Held    time.Duration // from Granted to Released or Lost
	Token   int64         // the fencing token of the grant (0 for a recipe without one)
	ByGrant bool          // Granted and after: it held on its predecessor's grant, without listing the queue (see WithGrants)
	Reason  LossReason    // why it was lost
	Err     error
}

// ItemEvent is an item offered to or taken from a queue, for Observer.
type ItemEvent struct {
	Context context.Context // the context given to Offer, Take or Poll
	Recipe  string          // "queue" (Queue) or "lqueue" (LockingQueue)
	Path    string          // the queue's path
	Wait    time.Duration   // Taken: from the call of Take or Poll to the item's taking
}

// ResyncEvent is a Cache's read of its whole tree after a reconnection or
// a lost connection, for Observer.Resynced.
type ResyncEvent struct {
	Path  string        // the Cache's path
	Nodes int           // the nodes in the copy after the read
	Took  time.Duration // from the start of the read to its end
}

// LossReason says why a holding was lost.
type LossReason string

// Why holdings are lost.
const (
	LossExpired LossReason = "expired" // the session expired
	LossClosed  LossReason = "closed"  // the session was closed (or ended otherwise) while it held
	LossStrict  LossReason = "strict"  // strict mode's margin passed without an answer
	LossDeleted LossReason = "deleted" // someone else deleted the holding's node
)

// WithObserver tells o of every holder of the Session's recipes, of the
// items of its queues and of its caches' resynchronizations (see
// Observer). To observe the client's
// requests and connections as well, give zkclient.WithObserver through
// WithClientOptions.
func WithObserver(o *Observer) SessionOption {
	return func(c *sessionConfig) { c.obs = o }
}

// recipeName names the kind of contender a seat queues.
func recipeName(k kind) string {
	switch k {
	case readerKind:
		return "read"
	case writerKind:
		return "write"
	case latchKind:
		return "election"
	}
	return "mutex"
}

// tell calls f with ev if both are set.
func tell(f func(HoldEvent), ev HoldEvent) {
	if f != nil {
		f(ev)
	}
}

// obsNow returns the time now if the Session has an Observer: the start of
// a call whose duration it is told.
func (s *Session) obsNow() time.Time {
	if s.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// offered tells the Observer, if any, that an item was offered to the
// queue recipe on path.
func (s *Session) offered(ctx context.Context, recipe, path string) {
	if s.obs != nil && s.obs.Offered != nil {
		s.obs.Offered(ItemEvent{Context: ctx, Recipe: recipe, Path: path})
	}
}

// taken tells the Observer, if any, that an item was taken from the queue
// recipe on path by a call that began at start.
func (s *Session) taken(ctx context.Context, recipe, path string, start time.Time) {
	if s.obs != nil && s.obs.Taken != nil {
		s.obs.Taken(ItemEvent{Context: ctx, Recipe: recipe, Path: path, Wait: time.Since(start)})
	}
}
