package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The properties of the counters and the queues.
const (
	// PropCounter: a counter's value after the heal is not what its
	// increments make (see counterCheck).
	PropCounter = "counter"
	// PropQueue: an item was lost, taken or consumed twice, taken
	// without having been offered, or left in a queue after the drain
	// (see queueCheck).
	PropQueue = "queue"
)

// DataCounts are the counter and queue workloads' figures.
type DataCounts struct {
	Increments  int // acknowledged
	Unconfirmed int // increments that ended with ErrWriteUnconfirmed
	Failed      int // increments that failed otherwise (not applied)
	Offers      int // acknowledged
	OfferMaybe  int // offers that ended with ErrWriteUnconfirmed
	Taken       int // acknowledged takes (Queue) and consumes (LockingQueue)
	TakeMaybe   int // takes and consumes that may or may not have been this consumer's
	Left        int // items still queued after the drain
}

type increment struct {
	at    time.Duration
	delta int64
	value int64 // the value it wrote, if acknowledged
	out   string
}

// counterCheck checks each counter against its increments (all of them
// positive, from 0): the value the server holds after the heal must be the
// sum of the acknowledged increments and of some of the unconfirmed ones,
// each counted once; and the acknowledged increments, each of which
// returned the value it wrote, must each own the range (value-delta,
// value] alone. So an acknowledged increment that was lost (the range is
// taken again by another, or the value falls short), one applied twice
// (a range no increment owns, or the value runs over), and one reported
// with a wrong value show. An increment that failed with any other error
// than ErrWriteUnconfirmed counts as not applied, as the recipes document;
// when only counting it would explain the value, the violation says so.
func counterCheck(events []Event) ([]Violation, DataCounts) {
	var out []Violation
	var c DataCounts
	incs := map[string][]increment{}
	final := map[string]Event{}
	healed := time.Duration(-1)
	for _, e := range events {
		switch e.Kind {
		case KindHealed:
			healed = e.At
		case KindCounter:
			out := e.ErrKind
			if e.Accepted {
				out = outcomeOK
				c.Increments++
			} else if out == outcomeUnconfirmed {
				c.Unconfirmed++
			} else {
				c.Failed++
			}
			incs[e.Res] = append(incs[e.Res], increment{e.At, e.Token, e.Value, out})
		case KindCounterValue:
			final[e.Res] = e
		}
	}
	for _, res := range sortedKeys(incs) {
		l := incs[res]
		f, ok := final[res]
		bad := func(at time.Duration, format string, args ...any) {
			out = append(out, Violation{Property: PropCounter, At: at, Res: res, Msg: res + ": " + fmt.Sprintf(format, args...)})
		}
		if !ok || !f.Accepted {
			if healed >= 0 {
				bad(healed, "its value was never read after the heal (%s)", f.Detail)
			}
			continue
		}
		if at, msg := explain(l, f.Value, false); msg != "" {
			if _, m := explain(l, f.Value, true); m == "" {
				msg += "; counting the increments that failed (reported not applied) as perhaps applied would explain it"
			}
			if at < 0 {
				at = f.At
			}
			bad(at, "%s", msg)
		}
	}
	return out, c
}

// explain says why the increments l do not make the value final ("" if
// they do), and when the first increment at fault returned (-1 if none
// is). With failedMaybe, increments that failed count as perhaps applied,
// like the unconfirmed ones.
func explain(l []increment, final int64, failedMaybe bool) (time.Duration, string) {
	var acked []increment
	var maybe []int64
	for _, in := range l {
		switch {
		case in.out == outcomeOK:
			acked = append(acked, in)
		case in.out == outcomeUnconfirmed, failedMaybe:
			maybe = append(maybe, in.delta)
		}
	}
	slices.SortFunc(acked, func(a, b increment) int { return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.at, b.at)) })
	// The gaps between the acknowledged ranges, from 0 to the value, are
	// what the unconfirmed increments must fill.
	var gaps, from []int64 // each gap, and where it starts
	prev, prevAt := int64(0), time.Duration(-1)
	for _, in := range acked {
		lo := in.value - in.delta
		if lo < prev {
			if prevAt < 0 {
				return in.at, fmt.Sprintf("the increment by %d at %.3fs reported the value %d, below its delta", in.delta, in.at.Seconds(), in.value)
			}
			return max(in.at, prevAt), fmt.Sprintf("the acknowledged increments at %.3fs (to %d) and at %.3fs (by %d to %d) claim the same part of the count: one was lost or reported a wrong value",
				prevAt.Seconds(), prev, in.at.Seconds(), in.delta, in.value)
		}
		gaps, from = append(gaps, lo-prev), append(from, prev)
		prev, prevAt = in.value, in.at
	}
	if final < prev {
		return prevAt, fmt.Sprintf("the value is %d, below %d, the value the acknowledged increment at %.3fs wrote: an acknowledged increment was lost", final, prev, prevAt.Seconds())
	}
	gaps, from = append(gaps, final-prev), append(from, prev)
	var total int64
	for _, g := range gaps {
		total += g
	}
	sums := subsetSums(maybe, total)
	if !sums[total] {
		return -1, fmt.Sprintf("the value is %d; the acknowledged increments make %d, and no set of the %d unconfirmed ones makes the other %d: an increment was lost or applied twice",
			final, final-total, len(maybe), total)
	}
	for i, g := range gaps {
		if !sums[g] {
			return -1, fmt.Sprintf("the count from %d to %d, which no acknowledged increment made, is made by no set of the %d unconfirmed ones: an increment was applied twice or lost",
				from[i], from[i]+g, len(maybe))
		}
	}
	return -1, ""
}

// subsetSums reports, for each sum from 0 to most, whether a subset of ds
// (all positive) adds up to it.
func subsetSums(ds []int64, most int64) []bool {
	can := make([]bool, most+1)
	can[0] = true
	for _, d := range ds {
		for s := most; s >= d; s-- {
			can[s] = can[s] || can[s-d]
		}
	}
	return can
}

// queueItem is what the history says about one item of a queue.
type queueItem struct {
	offered, offerMaybe, offerFailed bool
	firstAt                          time.Duration
	taken, takeMaybe                 int
	left                             bool
	lock                             string // when left: who held its lock then
	clients                          []int
}

// queueCheck checks each queue's items (each offered with data of its own)
// against what the Queue and LockingQueue document:
//
//   - Nothing is taken (Queue) or consumed (LockingQueue) that was not
//     offered, and nothing an Offer that failed (other than with
//     ErrWriteUnconfirmed) said it did not add.
//   - Every item is taken, or consumed, at most once: a second
//     acknowledged take or consume is a violation.
//   - Every acknowledged offer is taken, or consumed, once by the end:
//     the consumers drain the queues after the heal, so an item neither
//     taken (nor perhaps taken: ErrWriteUnconfirmed) nor left is lost,
//     and an item still queued after the drain is too. An item taken yet
//     still queued is taken twice waiting to happen.
//
// That a LockingQueue item is worked on by one consumer at a time (unless
// the first one's Lost closed) is the exclusion check's: each take is a
// holding of "lqueue/<item>", with one permit.
func queueCheck(events []Event) ([]Violation, DataCounts) {
	var out []Violation
	var c DataCounts
	queues := map[string]map[string]*queueItem{}
	scans := map[string]Event{}
	item := func(e Event) *queueItem {
		q := queues[e.Res]
		if q == nil {
			q = map[string]*queueItem{}
			queues[e.Res] = q
		}
		it := q[e.Data]
		if it == nil {
			it = &queueItem{firstAt: e.At}
			q[e.Data] = it
		}
		if e.Client >= 0 && !slices.Contains(it.clients, e.Client) {
			it.clients = append(it.clients, e.Client)
		}
		return it
	}
	healed := time.Duration(-1)
	var producers []string
	for _, e := range events {
		switch e.Kind {
		case KindHealed:
			healed = e.At
		case KindOffer:
			it := item(e)
			switch {
			case e.Accepted:
				it.offered = true
				c.Offers++
			case e.ErrKind == outcomeUnconfirmed:
				it.offerMaybe = true
				c.OfferMaybe++
			default:
				it.offerFailed = true
			}
			if !slices.Contains(producers, e.Res) {
				producers = append(producers, e.Res)
			}
		case KindTake, KindConsume:
			it := item(e)
			switch {
			case e.Accepted:
				it.taken++
				c.Taken++
				if it.taken > 1 {
					out = append(out, Violation{Property: PropQueue, At: e.At, Res: e.Res, Clients: it.clients,
						Msg: fmt.Sprintf("%s: item %q %s a second time", e.Res, e.Data, takenWord(e.Kind))})
				}
			case e.ErrKind != outcomeFailed:
				it.takeMaybe++
				c.TakeMaybe++
			}
		case KindQueueLeft:
			it := item(e)
			it.left, it.lock = true, cmp.Or(e.Detail, "no lock")
			c.Left++
		case KindQueueScan:
			scans[e.Res] = e
		}
	}
	for _, res := range sortedKeys(queues) {
		scan, scanned := scans[res]
		bad := func(at time.Duration, it *queueItem, format string, args ...any) {
			out = append(out, Violation{Property: PropQueue, At: at, Res: res, Clients: it.clients, Msg: res + ": " + fmt.Sprintf(format, args...)})
		}
		if !scanned {
			if healed >= 0 {
				out = append(out, Violation{Property: PropQueue, At: healed, Res: res, Msg: res + ": never listed after the drain"})
			}
			continue
		}
		what := "taken"
		if res == ResLQueue {
			what = "consumed"
		}
		for _, data := range sortedKeys(queues[res]) {
			it := queues[res][data]
			switch {
			case (it.taken > 0 || it.takeMaybe > 0 || it.left) && !it.offered && !it.offerMaybe:
				how := "never offered"
				if it.offerFailed {
					how = "offered only by an Offer that failed, which adds nothing"
				}
				bad(it.firstAt, it, "item %q was %s, yet %s", data, map[bool]string{true: "left in the queue", false: what}[it.left && it.taken == 0], how)
			case it.left && it.taken > 0:
				bad(scan.At, it, "item %q was %s, yet is still in the queue after the drain", data, what)
			case it.left:
				bad(scan.At, it, "item %q is still in the queue after the drain (drained: %v; %s)", data, scan.Accepted, it.lock)
			case it.offered && it.taken == 0 && it.takeMaybe == 0:
				bad(scan.At, it, "item %q, offered (acknowledged), was never %s and is not in the queue: lost", data, what)
			}
		}
	}
	return out, c
}

func takenWord(k Kind) string {
	if k == KindConsume {
		return "consumed"
	}
	return "taken"
}

// label is the resource a grant is counted under: a LockingQueue item's
// holding ("lqueue/<item>") under its queue.
func label(res string) string {
	before, _, _ := strings.Cut(res, "/")
	return before
}
