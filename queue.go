package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file is the contender queue that the mutex, the read/write lock and
// the election share: each contender creates an ephemeral sequential node;
// the sequence numbers order them; a contender holds when no earlier node
// blocks it, and otherwise watches only the nearest node that blocks it.

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

type contender struct {
	name   string
	seq    int32
	reader bool
}

// parseContender recognises a contender node name of one of kinds: a marker
// followed by the sequence number, which ZooKeeper writes as %010d: ten
// digits, or, once the counter has wrapped, a minus sign and nine or ten
// digits. Waiters parse every name of the queue on each wake-up, so this
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

// queue is one recipe path and the names that count as contenders there.
type queue struct {
	s     *Session
	dir   string
	kinds []kind

	beforeWatch func(pred string) // test hook: runs between listing and watching
}

// ticket is one contender's place in a queue: its node.
type ticket struct {
	q      *queue
	kind   kind
	prefix string // protected prefix "_c_<uuid>-"
	name   string // node name once created
	token  int64  // fencing token, set when it holds (see wait)
	// first is the listing sent right behind the create, without waiting
	// for it (the server answers in order, so it shows the new node): the
	// first look at the queue costs no round trip of its own. nil if none.
	first *zkclient.Call[zkclient.Listing]
}

// path returns the ticket's node path ("" before it was created).
func (t *ticket) path() string {
	if t.name == "" {
		return ""
	}
	return t.q.dir + "/" + t.name
}

// contenders lists the queue, sorted by sequence number.
func (q *queue) contenders(ctx context.Context) ([]contender, error) {
	kids, err := q.s.children(ctx, q.dir)
	if err != nil {
		return nil, err
	}
	return q.sorted(kids)
}

func (q *queue) sorted(kids []string) ([]contender, error) {
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

// enter creates a node of kind k with data in the queue. On error nothing of
// it is left behind.
func (q *queue) enter(ctx context.Context, k kind, data []byte) (*ticket, error) {
	t := &ticket{q: q, kind: k, prefix: "_c_" + uuid.NewString() + "-"}
	if err := t.create(ctx, data); err != nil {
		t.leave(ctx)
		return nil, err
	}
	return t, nil
}

// create makes the ticket's node with Curator's protected-create recovery:
// after a connection loss the create may or may not have happened, so the
// parent is searched for a node with our random prefix. The first listing
// of the queue is sent right behind the create.
func (t *ticket) create(ctx context.Context, data []byte) error {
	s, base := t.q.s, t.q.dir+"/"+t.prefix+t.kind.marker
	for missing := 0; ; {
		call := s.startCreate(base, data, zkclient.EphemeralSequential)
		s.stats.listings.Add(1)
		t.first = s.c.ChildrenAsync(t.q.dir)
		r, err := s.createWait(ctx, call)
		switch {
		case err == nil:
			t.name = r.Path[len(t.q.dir)+1:]
			return nil
		case errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.ensurePath(ctx, t.q.dir); err != nil {
				return err
			}
		case errors.Is(err, ErrConnectionLoss):
			t.first = nil
			if err := s.awaitUp(ctx); err != nil {
				return err
			}
			found, err := t.find(ctx)
			if err != nil {
				return err
			}
			if found != "" {
				t.name = found
				return nil
			}
		default:
			t.first = nil
			return fmt.Errorf("create in %s: %w", t.q.dir, err)
		}
	}
}

// requeue deletes the ticket's node and queues a new node of the same kind
// at the back in one multi: one write (one disk sync on the server) instead
// of two. It returns the new ticket, not yet waited for. If the multi was
// not applied (its answer was lost and the new node is not there), the old
// ticket still holds and requeue returns an error wrapping ErrConnectionLoss.
func (t *ticket) requeue(ctx context.Context, data []byte) (*ticket, error) {
	s := t.q.s
	n := &ticket{q: t.q, kind: t.kind, prefix: "_c_" + uuid.NewString() + "-"}
	base := t.q.dir + "/" + n.prefix + t.kind.marker
	s.stats.deletes.Add(1)
	s.stats.creates.Add(1)
	call := s.c.MultiAsync(s.c.DeleteOp(t.path(), -1),
		s.c.CreateOp(base, data, zkclient.EphemeralSequential, s.acl))
	s.stats.listings.Add(1)
	n.first = s.c.ChildrenAsync(t.q.dir)
	res, err := call.Wait(ctx)
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
	case err != nil:
		return nil, err
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("requeue in %s: %w", t.q.dir, r.Err)
		}
	}
	n.name = res[1].Path[len(t.q.dir)+1:]
	return n, nil
}

// find looks for the node created with the ticket's prefix. A node with the
// prefix that another session owns is never taken as ours: it is deleted.
func (t *ticket) find(ctx context.Context) (string, error) {
	s := t.q.s
	if err := retry(ctx, s, func() error { return s.c.Sync(ctx, t.q.dir) }); err != nil {
		return "", err
	}
	kids, err := s.children(ctx, t.q.dir)
	if errors.Is(err, zkclient.ErrNoNode) {
		return "", nil // the parent (a container) is gone, and our node with it
	}
	if err != nil {
		return "", err
	}
	for _, k := range kids {
		if !strings.HasPrefix(k, t.prefix) {
			continue
		}
		p := t.q.dir + "/" + k
		st, err := s.stat(ctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", err
		}
		if st.EphemeralOwner == s.ID() {
			return k, nil
		}
		if err := s.remove(ctx, p); err != nil {
			return "", err
		}
	}
	return "", nil
}

// wait blocks until the ticket holds. With try, it returns ErrLocked instead
// of waiting.
//
// It lists the queue, and watches the nearest node that blocks the ticket,
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
// The fencing token is the pzxid of the listing that shows no blocker: the
// zxid of the last change to the queue's children when the ticket was found
// holding. Each holder's listing came after the deletion of every node that
// blocked it, and a deletion is such a change, so a holder's token is above
// the zxid at which each earlier holder it waited for let go, and so above
// that holder's token (taken while it still held). Tokens therefore
// strictly increase from one holder to the next, even when the path is
// deleted and made again (zxids never repeat), without a read of their own.
func (t *ticket) wait(ctx context.Context, try bool) error {
	s, q := t.q.s, t.q
	lost := func() error {
		if err := s.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s", ErrNodeLost, t.path())
	}
	for {
		kids, parent, err := t.list(ctx)
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
		if p.blocker == "" {
			t.token = parent.Pzxid
			return nil
		}
		if try {
			return ErrLocked
		}
		if err := t.await(ctx, q.dir+"/"+p.blocker); err != nil {
			return err
		}
	}
}

// list returns the queue's children and the parent's Stat: the listing
// sent behind the create the first time, a new one after that.
func (t *ticket) list(ctx context.Context) ([]string, zkclient.Stat, error) {
	if first := t.first; first != nil {
		t.first = nil
		if l, err := first.Wait(ctx); err == nil {
			return l.Names, l.Stat, nil
		} else if ctx.Err() != nil {
			return nil, zkclient.Stat{}, err
		}
	}
	return t.q.s.childrenStat(ctx, t.q.dir)
}

// place is where a ticket stands in one listing of its queue.
type place struct {
	listed  bool   // the ticket's node is in the listing
	blocker string // the nearest earlier contender that blocks it; "" if none: it holds
}

// locate finds the ticket's place in a listing in one pass, without sorting
// it (a waiter does this on every wake-up, over the whole queue). It finds
// what blocker would in the sorted queue.
func (t *ticket) locate(kids []string) (place, error) {
	me, ok := parseContender(t.name, t.q.kinds)
	switch {
	case !ok:
		return place{}, fmt.Errorf("zkrecipes: %s: not a contender node name", t.path())
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
		case c.seq < me.seq && c.seq > nearest && blocks(c, me.reader):
			nearest, p.blocker = c.seq, k
		}
	}
	return p, nil
}

// await watches pred until it is deleted, or returns at once if it is
// already gone.
func (t *ticket) await(ctx context.Context, pred string) error {
	s, q := t.q.s, t.q
	for {
		if q.beforeWatch != nil {
			q.beforeWatch(pred)
		}
		_, w, err := s.getDataW(ctx, pred)
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case ev := <-w.event():
			switch ev.Type {
			case zkclient.EventNodeDeleted:
				return nil
			case zkclient.EventNotWatching:
				return s.Err()
			}
			// Its data changed: watch it again.
		case <-ctx.Done():
			w.stop()
			return ctx.Err()
		case <-s.Done():
			return s.Err()
		}
	}
}

// leave deletes the ticket's node, even when ctx has ended (with a fresh
// context bounded by the session timeout), retrying across connection loss
// while the session lives. If the node's name is unknown (a create whose
// answer was lost), every node with the ticket's prefix is deleted.
//
// When the server cannot be reached within the session timeout (a lost
// quorum does not expire sessions), leave returns an error wrapping
// ErrReleaseUnconfirmed and the Session goes on deleting the node in the
// background until it is gone or the session ends: a node left by a
// failed Lock or an unconfirmed Unlock would otherwise block every other
// contender for as long as the session lives.
func (t *ticket) leave(ctx context.Context) error {
	s := t.q.s
	if s.Err() != nil {
		return s.Err() // the server removed the node with the session
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	err := t.remove(cctx)
	if err != nil && cctx.Err() != nil && s.Err() == nil {
		s.removeLater(t.remove)
		return fmt.Errorf("%w: %s, after trying for %v (%v); deleting it in the background", ErrReleaseUnconfirmed, t.path(), s.Timeout(), err)
	}
	return err
}

func (t *ticket) remove(ctx context.Context) error {
	s := t.q.s
	if t.name != "" {
		return s.remove(ctx, t.path())
	}
	kids, err := s.children(ctx, t.q.dir)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if strings.HasPrefix(k, t.prefix) {
			if err := s.remove(ctx, t.q.dir+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}
