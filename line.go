package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file is the line of contenders that the mutex, the read/write lock and
// the election share, read in the order of a ticket's life: each contender
// enters the line by creating an ephemeral sequential node (its ticket, a
// protectedNode); the sequence numbers order them; a ticket waits until no
// earlier node blocks it, watching only the nearest node that does, and
// then holds; it leaves by deleting its node (or requeues at the back).
// The node names that count as contenders are in names.go.

// contender is one recognised node of a line.
type contender struct {
	name   string
	seq    int32
	reader bool
}

// blocks reports whether c, queued earlier, blocks a contender that is a
// reader (reader) or not. Writers (and mutex holders, and election
// candidates) wait for everything earlier; readers wait only for earlier
// writers.
func blocks(c contender, reader bool) bool { return !reader || !c.reader }

// blocker returns the index of the contender that q[i] watches — the
// nearest earlier one that blocks it — or -1 when q[i] holds.
func blocker(q []contender, i int) int {
	for j := i - 1; j >= 0; j-- {
		if blocks(q[j], q[i].reader) {
			return j
		}
	}
	return -1
}

// line is one recipe path and the names that count as contenders there.
type line struct {
	s     *Session
	dir   string
	kinds []kind
	// grants says a releasing holder may grant the line to its heirs (see
	// ticket.release): in the locks' lines, whose other clients (Curator's
	// InterProcessMutex and read/write lock, kazoo's locks, go-zookeeper/zk)
	// look again at any event of the node they watch. Not in an election's:
	// Curator's LeaderLatch, which shares its layout, acts only on the
	// deletion of the node it watches, so writing a candidate's node would
	// strand a LeaderLatch queued behind it.
	grants bool

	beforeWatch func(pred string) // test hook: runs between listing and watching
}

// contenders lists the line, sorted by sequence number.
func (q *line) contenders(ctx context.Context) ([]contender, error) {
	rd, err := q.s.read(ctx, q.dir, reading{op: readChildren})
	kids := rd.kids
	if err != nil {
		return nil, err
	}
	return q.sorted(kids)
}

func (q *line) sorted(kids []string) ([]contender, error) {
	cs := make([]contender, 0, len(kids))
	for _, k := range kids {
		if c, ok := parseContender(k, q.kinds); ok {
			if c.seq < 0 {
				return nil, fmt.Errorf("%w under %s (node %s)", ErrSequenceWrapped, q.dir, k)
			}
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b contender) int { return int(a.seq) - int(b.seq) })
	return cs, nil
}

// ticket is one contender's place in a line: its node.
type ticket struct {
	protectedNode
	q       *line
	kind    kind
	token   int64 // fencing token, set when it holds (see wait)
	ahead   int   // contenders ahead of it at its first listing (see wait)
	granted bool  // it holds by its predecessor's grant, not by a listing

	// heirs are the nodes the ticket grants the line to when it lets go
	// while holding (see release), found in its latest listing; later,
	// if not nil, delivers those of a later listing (see lookAhead).
	heirs []heir
	later <-chan []heir
	// mine watches the ticket's own node while it waits, from its first
	// wait on: a grant writes the node. nil until armed.
	mine *armed
}

// heir is a node a releasing holder grants the line to, and the data it
// writes back: the node's own (a grant must keep it), read while the
// ticket waited or held, unless the node's name says it is empty.
type heir struct {
	name string
	data *zkclient.Call[zkclient.Node] // nil: the node's data is empty
}

// armed is the watch on a ticket's own node while it waits. done closes
// once the read that sets it has answered; a grant is its data's change.
type armed struct {
	s    *Session
	done chan struct{}
	rd   reply
	err  error

	fired bool           // ev was taken from the watch
	ev    zkclient.Event // its event
}

// granted reports whether the ticket's node was written (granted): its
// version had moved when the watch was set, or its watch's event says so.
// gone reports that the node was deleted. Neither waits.
func (a *armed) state() (granted, gone bool) {
	if a == nil {
		return false, false // not armed: the line has no grants
	}
	select {
	case <-a.done:
	default:
		return false, false
	}
	switch {
	case errors.Is(a.err, zkclient.ErrNoNode):
		return false, true
	case a.err != nil:
		return false, false // the session is over: the next request says so
	case a.rd.st.Version > 0:
		return true, false
	}
	if !a.fired {
		select {
		case ev := <-a.rd.w.event():
			a.take(ev)
		default:
			return false, false
		}
	}
	return a.ev.Type == zkclient.EventNodeDataChanged, a.ev.Type == zkclient.EventNodeDeleted
}

// enter creates a node of kind k with data in the line. On error nothing of
// it is left behind.
func (q *line) enter(ctx context.Context, k kind, data []byte) (*ticket, error) {
	t := &ticket{protectedNode: newTicketNode(q.s, q.dir, len(data) > 0), q: q, kind: k}
	if err := t.create(ctx, k.marker, data); err != nil {
		t.leave(ctx)
		return nil, err
	}
	return t, nil
}

// wait blocks until the ticket holds. With try, it returns ErrLocked instead
// of waiting.
//
// It lists the line, and watches the nearest node that blocks the ticket,
// with a read that fails if that node is already gone (then it lists
// again: nothing slips between listing and watching). When the watched node
// goes, it lists again: that listing is what shows both that no blocker is
// left and that the ticket's own node is still there. A listing without
// the node (deleted by another client, say) ends the wait with ErrNodeLost
// instead of a holding nobody owns.
//
// A waiting ticket also watches its own node: a holder that knows the
// ticket is next grants it the line by writing the ticket's node in the
// transaction that deletes its own (see release), and the ticket then holds
// without listing — one write and one event per handoff. Only a holder
// writes a waiting contender's node, and only when nothing can be between
// them: the node it writes was the first after its own in a listing taken
// after its own was made, and nodes made later have higher sequence numbers
// than every node listed. When the watched predecessor's data changes (it
// was granted, or an election leader proclaimed), the ticket lists again,
// while it still waits, to learn its own heirs before its turn comes.
//
// The node is known to be this session's: either our own create returned it
// (the server answered on our session), or, after a connection loss, find
// checked its ephemeralOwner.
//
// The fencing token is the zxid that made the ticket's node (its czxid).
// Holders hold in the order of their nodes' sequence numbers (a holder's
// node has no earlier one left, and nodes made later get higher numbers),
// and sequence numbers and zxids are given out together, in one order, so
// tokens strictly increase from one holder to the next — by a grant or by a
// listing alike, and when the path is deleted and made again, since zxids
// never repeat — without a read of their own.
func (t *ticket) wait(ctx context.Context, try bool) error {
	err := t.waitTurn(ctx, try)
	if err != nil {
		t.disarm()
	}
	return err
}

func (t *ticket) waitTurn(ctx context.Context, try bool) error {
	s, q := t.q.s, t.q
	lost := func() error {
		if err := s.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrNodeLost, t.path())
	}
	for first := true; ; first = false {
		kids, _, err := t.list(ctx)
		if err != nil {
			return err
		}
		p, err := t.locate(kids)
		if err != nil {
			return err
		}
		if !p.listed {
			return lost()
		}
		if first {
			t.ahead = p.ahead
		}
		t.learn(p.heirs)
		if p.blocker == "" {
			t.token = t.czxid
			return nil
		}
		if try {
			return ErrLocked
		}
		if q.grants {
			t.arm()
		}
		granted, err := t.await(ctx, q.dir+"/"+p.blocker)
		switch {
		case errors.Is(err, ErrNodeLost):
			return lost()
		case err != nil:
			return err
		case granted:
			s.stats.granted.Add(1)
			t.token, t.granted = t.czxid, true
			if len(t.heirs) == 0 && t.later == nil {
				// Held without a listing, knowing no heir (it queued
				// last, and its predecessor was granted before it
				// watched it): look now, in the background, so that
				// its release can grant too. The listing replaces the
				// one its successor would take after a plain delete.
				t.lookAhead()
			}
			return nil
		}
	}
}

// arm starts setting the watch on the ticket's own node, once, without
// waiting for it: its read goes out beside the watch on the predecessor.
func (t *ticket) arm() {
	if t.mine != nil {
		return
	}
	a := &armed{s: t.s, done: make(chan struct{})}
	t.mine = a
	go func() {
		defer close(a.done)
		a.rd, a.err = t.s.read(context.Background(), t.path(), reading{op: readData, watch: true, count: &t.s.stats.holdWatches})
	}()
}

// disarm ends the watch on the ticket's own node, if armed.
func (t *ticket) disarm() {
	if a := t.mine; a != nil {
		t.mine = nil
		go a.stop()
	}
}

// take records the watch's event. It is counted with the holding's own
// watch events (Stats.HoldEvents): the watch becomes the holding's.
func (a *armed) take(ev zkclient.Event) {
	a.ev, a.fired = ev, true
	if ev.Type != zkclient.EventNotWatching {
		a.s.stats.holdEvents.Add(1)
	}
}

// wait waits until the read that sets the watch has answered (a nil
// armed: nothing to wait for).
func (a *armed) wait(ctx context.Context) error {
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.s.Done():
		return a.s.Err()
	}
}

// stop removes the watch once its read has answered.
func (a *armed) stop() {
	<-a.done
	a.rd.w.stop()
}

// ownWatch hands the watch on the ticket's own node over to its holding
// (see Session.holdNodeWatched), if it is armed and has not fired; else
// it returns nil (the holding reads the node again).
func (t *ticket) ownWatch() *armed {
	a := t.mine
	t.mine = nil
	if a == nil {
		return nil
	}
	if a.fired {
		go a.stop()
		return nil
	}
	return a
}

// place is where a ticket stands in one listing of its line.
type place struct {
	listed  bool     // the ticket's node is in the listing
	blocker string   // the nearest earlier contender that blocks it; "" if none: it holds
	ahead   int      // contenders listed before it, blocking it or not
	heirs   []string // what it grants the line to when it lets go (see heirNames)
}

// locate finds the ticket's place in a listing in one pass, without sorting
// it (a waiter does this on every wake-up, over the whole line). It finds
// what blocker would in the sorted line.
func (t *ticket) locate(kids []string) (place, error) {
	me, ok := parseContender(t.name, t.q.kinds)
	switch {
	case !ok:
		return place{}, errorf("%s: not a contender node name", t.path())
	case me.seq < 0:
		return place{}, fmt.Errorf("%w under %s (node %s)", ErrSequenceWrapped, t.q.dir, t.name)
	}
	var p place
	var nearest int32 = -1
	// The first contender after the ticket, and the first that is not a
	// reader: the ticket's heirs are among them (see heirNames).
	var next, writer contender
	next.seq, writer.seq = -1, -1
	for _, k := range kids {
		c, ok := parseContender(k, t.q.kinds)
		switch {
		case !ok:
		case c.seq < 0:
			return place{}, fmt.Errorf("%w under %s (node %s)", ErrSequenceWrapped, t.q.dir, k)
		case k == t.name:
			p.listed = true
		case c.seq < me.seq:
			p.ahead++
			if c.seq > nearest && blocks(c, me.reader) {
				nearest, p.blocker = c.seq, k
			}
		default:
			if next.seq < 0 || c.seq < next.seq {
				next = c
			}
			if !c.reader && (writer.seq < 0 || c.seq < writer.seq) {
				writer = c
			}
		}
	}
	if t.q.grants && !me.reader && next.seq >= 0 {
		p.heirs = heirNames(kids, t.q.kinds, next, writer)
	}
	return p, nil
}

// heirNames returns the contenders a holder that is not a reader grants the
// line to: the first contender after it, if that is not a reader; else every
// reader before the first later writer (none of them waits for anything
// but the holder). Only the contenders this library made can be granted
// (grantable); should the first be another's, there are none: it lists,
// when the holder's node goes, as it always has.
func heirNames(kids []string, kinds []kind, next, writer contender) []string {
	if !next.reader {
		if grantable(next.name) {
			return []string{next.name}
		}
		return nil
	}
	var out []string
	for _, k := range kids {
		c, ok := parseContender(k, kinds)
		if ok && c.reader && c.seq >= next.seq && (writer.seq < 0 || c.seq < writer.seq) && grantable(k) {
			out = append(out, k)
		}
	}
	return out
}

// learn records the heirs of the ticket's latest listing (see heirNames).
func (t *ticket) learn(names []string) {
	t.later = nil
	t.heirs = t.heirsOf(names, t.heirs)
}

// heirsOf returns the heirs named, reading the data of those whose data
// is not empty (a grant writes it back unchanged) in the background, unless
// known already: the read is answered long before the ticket lets go.
func (t *ticket) heirsOf(names []string, known []heir) []heir {
	var hs []heir
	for _, n := range names {
		h := heir{name: n}
		for _, old := range known {
			if old.name == n {
				h = old
			}
		}
		if h.data == nil && grantedData(n) {
			t.s.stats.reads.Add(1)
			h.data = t.s.c.GetAsync(t.q.dir + "/" + n)
		}
		hs = append(hs, h)
	}
	return hs
}

// await waits until pred, the nearest node that blocks the ticket, is
// deleted (then the caller lists again), or until a grant writes the
// ticket's own node (granted). It watches pred with getData, as Curator
// does: the read fails, setting no watch, if pred is gone. A grant's
// transaction also deletes pred, after the write: its events come in that
// order, and the grant is looked for first.
//
// When pred's data changes, in a line with grants pred was granted the
// line, and the ticket is next: it lists the line in the background, to
// know its own heirs by its turn, and watches pred again.
func (t *ticket) await(ctx context.Context, pred string) (granted bool, err error) {
	if t.q.beforeWatch != nil {
		t.q.beforeWatch(pred)
	}
	for {
		rd, err := t.s.read(ctx, pred, reading{op: readData, watch: true})
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return false, err
		}
		changed, granted, err := t.watch(ctx, rd, err != nil)
		if !changed {
			return granted, err
		}
		if t.q.grants {
			t.lookAhead()
		}
	}
}

// watch waits on the watch of pred read in rd (gone: pred was gone
// already) and on the ticket's own node: changed reports that pred's data
// changed.
func (t *ticket) watch(ctx context.Context, rd reply, gone bool) (changed, granted bool, err error) {
	s, mine := t.s, t.mine
	for {
		if gone {
			// A grant's multi deletes pred: before looking again, let
			// the read that watches our own node answer (it was sent
			// first, and is answered by then), lest a grant that came
			// be taken for a free line and listed for.
			if err := mine.wait(ctx); err != nil {
				return false, false, err
			}
		}
		granted, lost := mine.state()
		switch {
		case lost:
			rd.w.stop()
			return false, false, ErrNodeLost
		case granted:
			rd.w.stop()
			return false, true, nil
		case gone:
			return false, false, nil // list again
		}
		var done <-chan struct{}
		var own <-chan zkclient.Event
		if mine != nil {
			select {
			case <-mine.done:
				if mine.err == nil && !mine.fired {
					own = mine.rd.w.event()
				}
			default:
				done = mine.done
			}
		}
		select {
		case <-done:
		case ev := <-own:
			mine.take(ev)
		case ev := <-rd.w.event():
			switch ev.Type {
			case zkclient.EventNodeDataChanged:
				return true, false, nil
			case zkclient.EventNotWatching:
				if err := s.Err(); err != nil {
					return false, false, err
				}
			}
			// Deleted (or the watch ended): look again, unless a
			// grant came.
			gone = true
		case <-ctx.Done():
			rd.w.stop()
			return false, false, ctx.Err()
		case <-s.Done():
			return false, false, s.Err()
		}
	}
}

// lookAhead lists the line in the background and learns the ticket's heirs
// from that listing (see learn), ready by the time the ticket lets go.
func (t *ticket) lookAhead() {
	s := t.s
	s.stats.listings.Add(1)
	call := s.c.ChildrenAsync(t.q.dir)
	ch := make(chan []heir, 1)
	t.later = ch
	go func() {
		var hs []heir
		if l, err := call.Wait(context.Background()); err == nil {
			if p, err := t.locate(l.Names); err == nil && p.listed {
				hs = t.heirsOf(p.heirs, nil)
			}
		}
		ch <- hs
	}()
}

// release lets go of the line while the ticket holds. With heirs (see
// heirsOf), it grants them the line: one multi writes each heir's node
// with its own data, at version 0 (unchanged since it was made: it still
// waits, and only a grant writes it), and deletes the ticket's node, so
// that the heirs hold without a read. If there are none, or the multi
// fails (an heir left, or its answer was lost), the node is deleted as it
// always is (leave); a node the multi did delete is found gone.
func (t *ticket) release(ctx context.Context) error {
	if ops := t.grants(ctx); ops != nil && t.s.Err() == nil {
		s := t.s
		s.stats.deletes.Add(1)
		s.stats.grants.Add(1)
		res, err := s.c.MultiAsync(append(ops, s.c.DeleteOp(t.path(), -1))...).Wait(ctx)
		if err == nil && res[len(res)-1].Err == nil {
			return nil
		}
	}
	return t.leave(ctx)
}

// grants returns the writes that grant the line to the ticket's heirs, or
// nil if there are none to grant.
func (t *ticket) grants(ctx context.Context) []zkclient.Op {
	if ch := t.later; ch != nil {
		// The listing of the look ahead, most likely answered already.
		select {
		case t.heirs = <-ch:
		case <-ctx.Done():
		}
		t.later = nil
	}
	var ops []zkclient.Op
	for _, h := range t.heirs {
		var data []byte
		if h.data != nil {
			n, err := h.data.Wait(ctx)
			if err != nil || n.Stat.Version != 0 {
				continue // gone, or not as it was made
			}
			data = n.Data
		}
		ops = append(ops, t.s.c.SetOp(t.q.dir+"/"+h.name, data, 0))
	}
	return ops
}

// requeue deletes the ticket's node and queues a new node of the same kind
// at the back in one multi: one write (one disk sync on the server) instead
// of two, which grants the line to the ticket's heirs too, as release does.
// It returns the new ticket, not yet waited for. If the multi was not
// applied (its answer was lost and the new node is not there), the old
// ticket still holds and requeue returns an error wrapping ErrConnectionLoss.
func (t *ticket) requeue(ctx context.Context, data []byte) (*ticket, error) {
	s := t.q.s
	grants := t.grants(ctx)
	for {
		n := &ticket{protectedNode: newTicketNode(s, t.q.dir, len(data) > 0), q: t.q, kind: t.kind}
		base := t.q.dir + "/" + n.prefix + t.kind.marker
		s.stats.deletes.Add(1)
		s.stats.creates.Add(1)
		if len(grants) > 0 {
			s.stats.grants.Add(1)
		}
		call := s.c.MultiAsync(append(grants, s.c.DeleteOp(t.path(), -1),
			s.c.CreateOp(base, data, zkclient.EphemeralSequential, s.acl))...)
		s.stats.listings.Add(1)
		n.first = s.c.ChildrenAsync(t.q.dir)
		res, err := call.Wait(ctx)
		if err == nil {
			err = firstErr(res) // MultiAsync reports a failed operation in its result
		}
		switch {
		case errors.Is(err, ErrConnectionLoss):
			n.first = nil
			if err := s.awaitUp(ctx); err != nil {
				return nil, err
			}
			found, ferr := n.find(ctx)
			if ferr != nil {
				return nil, ferr
			}
			if found == "" {
				return nil, err
			}
			n.name = found
			return n, nil
		case err != nil && len(grants) > 0 && ctx.Err() == nil && s.Err() == nil && grantFailed(res, len(grants)):
			grants = nil // an heir left or changed: requeue without granting
			continue
		case err != nil:
			return nil, errorf("requeue in %s: %w", t.q.dir, err)
		}
		made := res[len(res)-1]
		n.name = made.Path[len(t.q.dir)+1:]
		n.czxid = call.Zxid()
		return n, nil
	}
}

// firstErr returns the first failed operation's error of a multi's results.
func firstErr(res []zkclient.OpResult) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// grantFailed reports whether a multi's first failed operation is one of
// its first k, the grants.
func grantFailed(res []zkclient.OpResult, k int) bool {
	for i, r := range res {
		if r.Err != nil && !errors.Is(r.Err, zkclient.ErrRuntimeInconsistency) {
			return i < k
		}
	}
	return false
}

// A ticket leaves the line by deleting its node: see protectedNode.leave.
