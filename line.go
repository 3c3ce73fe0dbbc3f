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

	// grants: when the line's writers take grants, and whether they grant
	// (a Mutex's, an Election's, an RWMutex's: see WithGrants and grant.go).
	grants grantMode

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
	q     *line
	kind  kind
	token int64 // fencing token, set when it holds (see wait)
	ahead int   // contenders ahead of it at its first listing (see wait)
	grantable
}

// enter creates a node of kind k with data in the line. On error nothing of
// it is left behind.
func (q *line) enter(ctx context.Context, k kind, data []byte) (*ticket, error) {
	t := q.ticket(ctx, k)
	if err := t.create(ctx, k.marker, data); err != nil {
		t.leave(ctx) // then unregister: the route stays while the node may
		t.unregister()
		return nil, err
	}
	return t, nil
}

// ticket returns a new ticket of kind k, not yet made: one that takes
// grants, enrolled with its session's grant route, where the line's
// contenders do: with WithGrants, always (the route is set
// up if need be); by default, when the session has a route there already
// (see warmRoute). Without a route (it could not be set up: ctx ended,
// say) the ticket takes no grants, and its name says so.
func (q *line) ticket(ctx context.Context, k kind) *ticket {
	var r *grantRoute
	switch {
	case q.grants == grantsNever:
	case q.grants == grantsAlways:
		r, _ = q.s.route(ctx, q.dir)
	default:
		r = q.s.liveRoute(q.dir)
	}
	if r == nil {
		return &ticket{protectedNode: newProtectedNode(q.s, q.dir, ""), q: q, kind: k}
	}
	t := &ticket{protectedNode: newProtectedNode(q.s, q.dir, q.s.grantingUUID()), q: q, kind: k}
	t.register(r)
	return t
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
// The node is known to be this session's: either our own create returned it
// (the server answered on our session), or, after a connection loss, find
// checked its ephemeralOwner.
//
// A ticket that takes grants (see WithGrants) also holds when a grant
// comes while it waits; then it reads no listing.
//
// The fencing token is the zxid that created the ticket's node (its
// czxid), whether the ticket held on a listing or on a grant: one rule for
// every holder of the path. A holder's node sorts after the node of every
// holder before it (each of them was ahead of it in the line, or gone
// before the line was made again), so it was created later, and its czxid
// is higher: tokens strictly increase from one holder to the next, even
// when the path is deleted and made again (zxids never repeat). The create
// answers with the node's Stat (create2), so the token costs no request
// of its own, except after a create whose answer was lost (one read).
func (t *ticket) wait(ctx context.Context, try bool) error {
	s, q := t.q.s, t.q
	lost := func() error {
		if err := s.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrNodeLost, t.path())
	}
	for first := true; ; first = false {
		if t.granted() {
			s.stats.granted.Add(1)
			t.byGrant = true
			return t.holds(ctx)
		}
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
		if p.blocker == "" {
			if q.grants != grantsNever && !t.granted() {
				t.successors(kids)
			}
			return t.holds(ctx)
		}
		if try {
			return ErrLocked
		}
		if first && t.route == nil && q.grants == grantsOnContention {
			t.pin = s.warmRoute(q.dir)
		}
		if err := t.await(ctx, q.dir+"/"+p.blocker); err != nil {
			return err
		}
	}
}

// holds sets the token of a ticket found holding: its node's czxid, read
// if the create's answer was lost.
func (t *ticket) holds(ctx context.Context) error {
	if t.czxid == 0 {
		r, err := t.q.s.read(ctx, t.path(), reading{op: readStat})
		if err != nil {
			return err
		}
		t.czxid = r.st.Czxid
	}
	t.token = t.czxid
	return nil
}

// place is where a ticket stands in one listing of its line.
type place struct {
	listed  bool   // the ticket's node is in the listing
	blocker string // the nearest earlier contender that blocks it; "" if none: it holds
	ahead   int    // contenders listed before it, blocking it or not
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
		}
	}
	return p, nil
}

// await watches pred until it is deleted, or returns at once if it is
// already gone; a ticket that takes grants returns also when a grant comes
// (then wait holds on it). It watches with getData, as Curator does: the
// read fails, setting no watch, if pred is gone.
func (t *ticket) await(ctx context.Context, pred string) error {
	if t.q.beforeWatch != nil {
		t.q.beforeWatch(pred)
	}
	if t.granted() {
		return nil
	}
	g, err := t.s.awaitDeletedOr(ctx, pred, readData, nil, t.gch)
	if g != "" {
		t.took(g)
	}
	return err
}

// requeue deletes the ticket's node and queues a new node of the same kind
// at the back in one multi: one write (one disk sync on the server) instead
// of two. It returns the new ticket, not yet waited for. If the multi was
// not applied (its answer was lost and the new node is not there), the old
// ticket still holds and requeue returns an error wrapping ErrConnectionLoss.
func (t *ticket) requeue(ctx context.Context, data []byte) (_ *ticket, err error) {
	s := t.q.s
	n := t.q.ticket(ctx, t.kind)
	defer func() {
		if err != nil {
			n.unregister()
		}
	}()
	base := t.q.dir + "/" + n.prefix + t.kind.marker
	s.stats.deletes.Add(1)
	s.stats.creates.Add(1)
	// The multi's answer is awaited even once ctx ends (for up to the
	// session timeout), so that whether it was applied is known: which
	// node, the old or the new, the seat must leave.
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	ops, heirs := t.grantOps()
	res, zxid, err := t.handOff(cctx, ops, heirs, func() {
		s.stats.listings.Add(1)
		n.first = s.c.ChildrenAsync(t.q.dir)
	}, s.c.DeleteOp(t.path(), -1), s.c.CreateOp(base, data, zkclient.EphemeralSequential, s.acl))
	switch {
	case errors.Is(err, ErrConnectionLoss):
		n.first = nil
		found, ferr := "", s.awaitUp(ctx)
		if ferr == nil {
			found, ferr = n.find(ctx)
		}
		if ferr != nil {
			// ctx (or the session) ended before it was known whether
			// the multi was applied: the new node, if it was made,
			// leaves in the background (the caller sees to the old).
			s.removeLater(n.remove)
			return nil, ferr
		}
		if found == "" {
			return nil, err
		}
		n.name = found
		return n, nil
	case err != nil:
		// No answer within the session timeout: applied or not, unknown.
		s.removeLater(n.remove)
		return nil, err
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, errorf("requeue in %s: %w", t.q.dir, r.Err)
		}
	}
	n.name = res[1].Path[len(t.q.dir)+1:]
	n.czxid = zxid
	return n, nil
}

// A ticket leaves the line by deleting its node: see protectedNode.leave.
