package nemesis

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Kind is what an Event records.
type Kind uint8

// The kinds of event.
const (
	KindFault        Kind = iota + 1 // a fault begins (Detail says what, with its targets)
	KindFaultEnd                     // the fault was healed (Detail: anything learnt, such as a trap that fired)
	KindHealed                       // everything healed after the last fault: the progress clock starts
	KindWorkload                     // a workload of Client on Res starts
	KindSession                      // Client's session Gen starts: Session, Strict, Timeout
	KindSessionEnd                   // Client's session Gen is over: ErrKind, Confirmed
	KindForcedExpiry                 // the nemesis is about to expire Client's session Gen on purpose
	KindGrant                        // a holding starts: Holding, Res, Mode, Token, Op, Empty
	KindLost                         // the holder noticed the holding's Lost closed
	KindRelease                      // the holder starts releasing the holding
	KindWrite                        // a fenced write to the register of Res: Token, Accepted
	KindBusy                         // a try operation found the resource taken (ErrLocked)
	KindError                        // a recipe call failed: Op, ErrKind, Detail (the error)
	KindLeftover                     // a node left after every session closed (Detail: its path)
	KindScan                         // the leftover scan ran (Detail: what it looked at)
	KindOrphanCheck                  // after a failed call Op, its session's nodes under Res were looked for (Detail: those left, "" if none)
	KindQueue                        // workloads made no progress after the heal: what a recipe's path held (Detail)

	KindTreeWrite   // the cache writer's create, set or delete of Path: Op, Data, Accepted (acknowledged), ErrKind (the outcome), the node's Stat when the answer had one
	KindCacheStart  // a Cache of Client/Gen starts on Path: Holding is the cache's id
	KindCacheEvent  // the cache Holding reported Op ("created", ...) for Path: Data, Czxid, Mzxid, Version
	KindCopyNode    // one node of a snapshot about cache Holding: Op "cache" (its copy) or "server" (the server's tree)
	KindSnapshot    // closes the snapshot of cache Holding: Op "end" (the cache stopped: its copy) or "final" (after the heal: copy and server tree; Accepted: the runner found them equal)
	KindQuiet       // a workload that changes data (Res) stopped changing it after the heal (Path: the PersistentNode's)
	KindNodeSet     // a PersistentNode of Client at Path was created (Op pnode.create) or given data (pnode.setdata): Data, Accepted (acknowledged)
	KindNodeDelete  // Client deleted another's PersistentNode at Path (Accepted: it was there)
	KindNodeSession // a session the PersistentNode at Path is kept on: Session (its first, or one renewal made)
	KindNodeSeen    // after the heal, what the server held at Path: Accepted (it exists), Data, Session (its ephemeralOwner)

	KindCounter      // an increment of counter Res by Token: Op, Accepted (acknowledged; Value is the value it wrote), ErrKind ("unconfirmed", "failed")
	KindCounterValue // after the heal, counter Res's value on the server: Value
	KindOffer        // an offer of the item Data to queue Res: Accepted (acknowledged), ErrKind ("unconfirmed", "failed")
	KindTake         // a take of the item Data from queue Res: Accepted (acknowledged), ErrKind ("unconfirmed": it may have been another consumer's)
	KindConsume      // a LockingQueue consumer consumed the item Data of queue Res: Accepted, ErrKind ("failed": certainly not consumed; "unconfirmed": it may have been)
	KindQueueLeft    // after the drain, an item Data still in queue Res (Path: its node)
	KindQueueScan    // the end of queue Res's listing after the drain: Accepted (the queue was empty before the consumers stopped)
)

var kindNames = map[Kind]string{
	KindFault: "fault", KindFaultEnd: "fault-end", KindHealed: "healed",
	KindWorkload: "workload", KindSession: "session", KindSessionEnd: "session-end",
	KindForcedExpiry: "forced-expiry", KindGrant: "grant", KindLost: "lost",
	KindRelease: "release", KindWrite: "write", KindBusy: "busy", KindError: "error",
	KindLeftover: "leftover", KindScan: "scan", KindOrphanCheck: "orphan-check", KindQueue: "queue",
	KindTreeWrite: "tree-write", KindCacheStart: "cache-start", KindCacheEvent: "cache-event",
	KindCopyNode: "copy-node", KindSnapshot: "snapshot", KindQuiet: "quiet", KindNodeSet: "node-set",
	KindNodeDelete: "node-delete", KindNodeSession: "node-session", KindNodeSeen: "node-seen",
	KindCounter: "counter", KindCounterValue: "counter-value", KindOffer: "offer", KindTake: "take",
	KindConsume: "consume", KindQueueLeft: "queue-left", KindQueueScan: "queue-scan",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Mode is how a holding shares its resource.
type Mode uint8

// The modes of a holding.
const (
	Exclusive Mode = iota + 1 // a mutex, a write lock, a leadership
	Shared                    // a read lock: conflicts only with exclusive holdings
	Permit                    // a semaphore lease: at most the resource's permits at once
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	case Permit:
		return "permit"
	}
	return fmt.Sprintf("mode(%d)", m)
}

// Event is one entry of a History. Which fields matter depends on Kind.
type Event struct {
	At   time.Duration // since the history began, on the process's monotonic clock
	Kind Kind

	Client int   // the client (session slot) concerned; -1 for none
	Gen    int32 // the client's session generation (a new Session after an expiry is the next)

	Res     string // the resource: a recipe path's short name
	Mode    Mode   // Grant
	Holding int32  // Grant, Lost, Release, Write: the holding's id, unique in the history; cache events: the cache's id
	Token   int64  // Grant: the fencing token (0 for a permit); Write: the token written
	Op      string // Grant, Busy, Error: the call ("mutex.lock", ...)
	// Work names the workload of a Grant when Res does not: the grants
	// of one MultiLock call, one per path, are that MultiLock workload's.
	Work string

	Empty    bool // Grant: Lost was already closed when the call returned
	Accepted bool // Write: the register accepted it
	Strict   bool // Session: strict mode

	Session   int64         // Session, ForcedExpiry: the ZooKeeper session id
	Timeout   time.Duration // Session: the negotiated session timeout
	Confirmed time.Duration // SessionEnd: send time of the newest answered request (history time)

	ErrKind string // Error: Classify's kind ("" if unknown); SessionEnd: why the session ended
	Detail  string

	// A node, for the cache and PersistentNode events.
	Path    string
	Data    string
	Czxid   int64
	Mzxid   int64
	Version int32

	Value int64 // Counter, CounterValue: the counter's value
}

// String formats the event as one timeline line.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%10.3fs %-13s", e.At.Seconds(), e.Kind)
	if e.Client >= 0 && e.Kind != KindFault && e.Kind != KindFaultEnd && e.Kind != KindHealed &&
		e.Kind != KindLeftover && e.Kind != KindScan {
		fmt.Fprintf(&b, " c%d/%d", e.Client, e.Gen)
	}
	switch e.Kind {
	case KindWorkload:
		fmt.Fprintf(&b, " %s", e.Res)
	case KindSession:
		fmt.Fprintf(&b, " 0x%x timeout=%v strict=%v", e.Session, e.Timeout, e.Strict)
	case KindSessionEnd:
		fmt.Fprintf(&b, " %s confirmed=%.3fs", e.ErrKind, e.Confirmed.Seconds())
	case KindForcedExpiry:
		fmt.Fprintf(&b, " 0x%x", e.Session)
	case KindGrant:
		fmt.Fprintf(&b, " %s h%d %s %s token=%d", e.Res, e.Holding, e.Mode, e.Op, e.Token)
		if e.Work != "" {
			fmt.Fprintf(&b, " (%s)", e.Work)
		}
		if e.Empty {
			b.WriteString(" (lost at grant)")
		}
	case KindLost, KindRelease:
		fmt.Fprintf(&b, " %s h%d", e.Res, e.Holding)
	case KindWrite:
		fmt.Fprintf(&b, " %s h%d token=%d accepted=%v", e.Res, e.Holding, e.Token, e.Accepted)
	case KindBusy, KindOrphanCheck:
		fmt.Fprintf(&b, " %s %s", e.Res, e.Op)
	case KindTreeWrite:
		fmt.Fprintf(&b, " %s %s %q %s", e.Op, e.Path, e.Data, e.ErrKind)
		if e.Czxid != 0 {
			fmt.Fprintf(&b, " czxid=0x%x mzxid=0x%x version=%d", e.Czxid, e.Mzxid, e.Version)
		}
	case KindCacheStart:
		fmt.Fprintf(&b, " cache#%d on %s", e.Holding, e.Path)
	case KindCacheEvent, KindCopyNode:
		fmt.Fprintf(&b, " cache#%d %s %s", e.Holding, e.Op, e.Path)
		if e.Op != "initialized" {
			fmt.Fprintf(&b, " %q czxid=0x%x mzxid=0x%x version=%d", e.Data, e.Czxid, e.Mzxid, e.Version)
		}
	case KindSnapshot:
		fmt.Fprintf(&b, " cache#%d %s equal=%v", e.Holding, e.Op, e.Accepted)
	case KindQuiet:
		fmt.Fprintf(&b, " %s %s", e.Res, e.Path)
	case KindNodeSet:
		fmt.Fprintf(&b, " %s %s %q acknowledged=%v", e.Op, e.Path, e.Data, e.Accepted)
	case KindNodeDelete:
		fmt.Fprintf(&b, " %s existed=%v", e.Path, e.Accepted)
	case KindNodeSession:
		fmt.Fprintf(&b, " %s 0x%x", e.Path, e.Session)
	case KindNodeSeen:
		fmt.Fprintf(&b, " %s exists=%v %q owner=0x%x", e.Path, e.Accepted, e.Data, e.Session)
	case KindCounter:
		fmt.Fprintf(&b, " %s %s +%d", e.Res, e.Op, e.Token)
		if e.Accepted {
			fmt.Fprintf(&b, " = %d", e.Value)
		} else {
			b.WriteString(" " + e.ErrKind)
		}
	case KindCounterValue:
		fmt.Fprintf(&b, " %s = %d", e.Res, e.Value)
	case KindOffer, KindTake, KindConsume, KindQueueLeft:
		fmt.Fprintf(&b, " %s %q", e.Res, e.Data)
		if e.Kind != KindQueueLeft {
			if e.Accepted {
				b.WriteString(" ok")
			} else {
				b.WriteString(" " + e.ErrKind)
			}
		}
	case KindQueueScan:
		fmt.Fprintf(&b, " %s drained=%v", e.Res, e.Accepted)
	case KindError:
		kind := e.ErrKind
		if kind == "" {
			kind = "UNKNOWN"
		}
		fmt.Fprintf(&b, " %s [%s]", e.Op, kind)
	}
	if e.Detail != "" {
		b.WriteString(" " + e.Detail)
	}
	return b.String()
}

// History records events with timestamps from one monotonic clock. It is
// safe for concurrent use; events are kept in the order of their
// timestamps.
type History struct {
	base time.Time

	mu     sync.Mutex
	events []Event
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{base: time.Now()} }

// Record stamps e with the current time and appends it. It returns the
// stamped event.
func (h *History) Record(e Event) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.At = time.Since(h.base)
	h.events = append(h.events, e)
	return e
}

// Now returns the current history time.
func (h *History) Now() time.Duration { return time.Since(h.base) }

// Since converts a time.Time of this process (with its monotonic reading)
// to history time.
func (h *History) Since(t time.Time) time.Duration { return t.Sub(h.base) }

// Events returns a copy of the events recorded so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Timeline formats the events within window of v's time that concern it:
// every fault, the sessions and errors of the clients involved, and the
// grants, losses, releases and writes of v's resource (or, for a violation
// without a resource, everything). At most max lines are shown, the ones
// nearest v's time; the rest are counted.
func Timeline(events []Event, v Violation, window time.Duration, max int) string {
	clients := map[int]bool{}
	for _, c := range v.Clients {
		clients[c] = true
	}
	holdings := map[int32]bool{}
	for _, h := range v.Holdings {
		holdings[h] = true
	}
	var picked []int
	for i, e := range events {
		if e.At < v.At-window || e.At > v.At+window {
			continue
		}
		relevant := false
		switch e.Kind {
		case KindFault, KindFaultEnd, KindHealed, KindForcedExpiry, KindLeftover, KindScan:
			relevant = true
		case KindSession, KindSessionEnd, KindError:
			relevant = v.Res == "" || clients[e.Client]
		case KindGrant, KindLost, KindRelease, KindWrite, KindBusy, KindOrphanCheck,
			KindTreeWrite, KindCacheStart, KindCacheEvent, KindCopyNode, KindSnapshot,
			KindQuiet, KindNodeSet, KindNodeDelete, KindNodeSession, KindNodeSeen,
			KindCounter, KindCounterValue, KindOffer, KindTake, KindConsume, KindQueueLeft, KindQueueScan:
			relevant = v.Res == "" || e.Res == v.Res || holdings[e.Holding]
		default:
			relevant = true
		}
		if relevant {
			picked = append(picked, i)
		}
	}
	omitted := 0
	if max > 0 && len(picked) > max {
		// Keep the max lines nearest v.At.
		lo := 0
		for lo+max < len(picked) && distance(events[picked[lo]].At, v.At) > distance(events[picked[lo+max]].At, v.At) {
			lo++
		}
		omitted = len(picked) - max
		picked = picked[lo : lo+max]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- timeline around %.3fs (±%v) ---\n", v.At.Seconds(), window)
	for _, i := range picked {
		mark := "   "
		if holdings[events[i].Holding] && events[i].Holding != 0 {
			mark = ">> "
		}
		b.WriteString(mark + events[i].String() + "\n")
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "(%d more events in the window not shown)\n", omitted)
	}
	return b.String()
}

func distance(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
