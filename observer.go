package zkrecipes

import (
	"context"
	"time"
)

// Observer is told of the life of each contender of a Mutex, an RWMutex
// or an Election, for metrics and tracing. Every field is optional: a nil
// func is not called.
//
// Each acquisition is told as Queued, then exactly one of Granted or
// Abandoned; each grant is then ended by exactly one of Released or Lost
// (a holding lost and then unlocked is told as Lost only). A Requeue is a
// Released, then a new Queued.
//
// The funcs are called synchronously: Queued, Granted, Abandoned and
// Released on the goroutine of the call that caused them (Lock, Unlock,
// Campaign, ...); Lost at the moment the holding's Lost channel closes, on
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
	Recipe  string        // "mutex", "read" or "write" (RWMutex), "election"
	Path    string        // the recipe's path
	Node    string        // the contender's node, once queued (Granted, Released, Lost)
	Ahead   int           // contenders queued before it when it first looked (Granted and after)
	Wait    time.Duration // from Queued to Granted or Abandoned
	Held    time.Duration // from Granted to Released or Lost
	Token   int64         // the fencing token of the grant
	Reason  LossReason    // why it was lost
	Err     error
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

// WithObserver tells o of every contender of the Session's mutexes,
// read-write locks and elections (see Observer). To observe the client's
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
