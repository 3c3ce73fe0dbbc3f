package zkrecipes

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// This file holds every node name the recipes recognise, shared with
// Curator and kazoo, and their parsing: the contender nodes of the locks
// and the election (a marker, then the 10-digit sequence number), the
// semaphore's leases, and the work queues' items.

// kind is a recognised contender node name: the marker that precedes the
// 10-digit sequence number, and whether such a contender is a reader.
type kind struct {
	marker string
	reader bool
}

// Node name markers, shared with Curator (after its "_c_<uuid>-" prefix)
// and kazoo.
var (
	// mutexKind is Curator's InterProcessMutex and go-zookeeper/zk's Lock.
	mutexKind = kind{marker: "lock-"}
	// readerKind and writerKind are Curator's InterProcessReadWriteLock.
	readerKind = kind{marker: "__READ__", reader: true}
	writerKind = kind{marker: "__WRIT__"}
	// lockKinds are the nodes that take part in a lock on one path,
	// whichever recipe or client made them: a Mutex node counts as a
	// writer of an RWMutex on the same path, and kazoo's ReadLock and
	// Lock/WriteLock nodes ("__rlock__", "__lock__") count too.
	lockKinds = []kind{mutexKind, readerKind, writerKind, {"__rlock__", true}, {"__lock__", false}}
)

// latchKind is Curator LeaderLatch's node name: "_c_<uuid>-latch-<seq>",
// whose data is the participant's id.
var (
	latchKind  = kind{marker: "latch-"}
	latchKinds = []kind{latchKind}
)

// leaseKind is Curator InterProcessSemaphoreV2's lease node name,
// "_c_<uuid>-lease-<seq>".
var leaseKind = kind{marker: "lease-"}

// lineKinds are the contenders Inspect recognises: those of every line
// recipe.
var lineKinds = slices.Concat(lockKinds, latchKinds)

// parseContender recognises a contender node name of one of kinds: a marker
// followed by the sequence number, which ZooKeeper writes as %010d: ten
// digits, or, once the counter has wrapped, a minus sign and nine or ten
// digits. Waiters parse every name of the line on each wake-up, so this
// reads the digits itself rather than through strconv.
func parseContender(name string, kinds []kind) (contender, bool) {
	for _, width := range []int{10, 11} {
		if len(name) < width {
			continue
		}
		head, tail := name[:len(name)-width], name[len(name)-width:]
		seq, ok := parseSeq(tail)
		if !ok || (width == 11 && seq >= 0) {
			continue
		}
		for _, k := range kinds {
			if strings.HasSuffix(head, k.marker) {
				return contender{name: name, seq: seq, reader: k.reader}, true
			}
		}
	}
	return contender{}, false
}

// parseSeq reads a decimal int32 of at most ten digits, with an optional
// leading minus sign.
func parseSeq(s string) (int32, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if s == "" || len(s) > 10 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + int64(d)
	}
	if neg {
		v = -v
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// kindOf returns the kind of the contender node name, one of lineKinds.
func kindOf(name string) kind {
	for _, k := range lineKinds {
		if _, ok := parseContender(name, []kind{k}); ok {
			return k
		}
	}
	return kind{}
}

// The layouts a contender's node name can follow, for Contender.Layout.
const (
	// layoutCurator is Apache Curator's "_c_<uuid>-<marker><seq>" (its
	// protected mode's prefix, then the recipe's marker), which the
	// recipes of this package write too.
	layoutCurator = "curator"
	// layoutKazoo is kazoo's "<id>__lock__<seq>" and "<id>__rlock__<seq>".
	layoutKazoo = "kazoo"
)

// layoutOf returns the layout of the contender node name, one of
// lineKinds: layoutCurator, layoutKazoo, or "" for another naming (a
// marker without Curator's prefix, say).
func layoutOf(name string) string {
	k := kindOf(name)
	if k.marker == "__lock__" || k.marker == "__rlock__" {
		return layoutKazoo
	}
	// "_c_", a UUID in its 36-character text form, "-".
	const prefix = len("_c_") + 36 + 1
	if len(name) > prefix && strings.HasPrefix(name, "_c_") && name[prefix-1] == '-' {
		if _, err := uuid.Parse(name[3 : prefix-1]); err == nil {
			return layoutCurator
		}
	}
	return ""
}

// kindName names a kind for Contender.Kind.
func kindName(k kind) string {
	switch {
	case k == latchKind:
		return "candidate"
	case k.reader:
		return "reader"
	case k == writerKind:
		return "writer"
	}
	return "mutex"
}

// Item node name prefixes: Curator's SimpleDistributedQueue (and ZooKeeper's
// own queue recipe) name items "qn-<seq>"; kazoo's Queue and LockingQueue
// name them "entry-<priority>-<seq>", the priority three digits.
const (
	curatorItemPrefix = "qn-"
	kazooItemPrefix   = "entry-"
	// kazooDefaultPriority is kazoo's put's default priority.
	kazooDefaultPriority = 100
)

// isItem reports whether a child of a work queue's path is an item, in
// either client's naming.
func isItem(name string) bool {
	return strings.HasPrefix(name, curatorItemPrefix) || strings.HasPrefix(name, kazooItemPrefix)
}

// items returns the items among kids in the order consumers take them: by
// name, as Curator and kazoo sort them. With Curator's names that is
// arrival order; with kazoo's, priority then arrival order; kazoo's items
// come before Curator's in a queue that holds both.
func items(kids []string) []string {
	out := slices.DeleteFunc(slices.Clone(kids), func(k string) bool { return !isItem(k) })
	slices.Sort(out)
	return out
}

// itemName returns the name prefix an Offer creates.
func itemName(kazoo bool, priority int) string {
	if !kazoo {
		return curatorItemPrefix
	}
	return fmt.Sprintf("%s%03d-", kazooItemPrefix, priority)
}
