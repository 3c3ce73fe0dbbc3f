package zkrecipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// NodeOption configures a PersistentNode or a PersistentTTLNode.
type NodeOption func(*nodeConfig)

type nodeConfig struct {
	mode  zkclient.CreateMode
	renew func(context.Context) (*Session, error)
}

// WithSessionRenewal makes a PersistentNode outlive its session: once the
// session expires, the node calls renew for a new Session (again, with a
// growing pause up to 5 s, while renew fails) and re-creates the node on
// it. The sessions renew returns belong to the PersistentNode, which closes
// them when it is closed itself, or when they expire in turn; the session
// given to CreatePersistentNode stays its caller's. renew must return when
// its ctx ends (Close ends it). Without this option the node is kept only
// as long as that session lives (see PersistentNode.Done).
func WithSessionRenewal(renew func(ctx context.Context) (*Session, error)) NodeOption {
	return func(c *nodeConfig) { c.renew = renew }
}

// PersistentNode keeps a node at a path, with its data, for as long as it
// is not closed, like Apache Curator's PersistentNode: whoever deletes the
// node, and whatever happens to the connection, it is made again, and,
// with WithSessionRenewal, again on a new session after the session
// expired. Its mode is given as to Session.Create; an ephemeral node is
// gone soon after the process dies.
//
// The node is watched (one watch, one goroutine): its deletion is seen
// from the watch's event, which the client restores after a reconnection,
// so a deletion while the connection was down is seen too. A re-creation
// uses the latest data given to SetData. Missing parents are created as
// containers.
//
// An existing node of the same name is taken over only when that is sound:
// a persistent node (or container) is ours to keep, and its data is set to
// ours, as Curator does; an ephemeral node of another session (or of
// another PersistentNode of this session) is not: the PersistentNode waits
// until it is gone, for instance until its owner's session expires, then
// creates its own; an ephemeral PersistentNode that finds a persistent node
// in its way stops (Done, Err) with an error wrapping
// zkclient.ErrNodeExists. So the node may be missing, or another's, for a
// while: between a deletion and the re-creation, during a session
// renewal, while another session's node of that name lives. Two
// PersistentNodes of one persistent path share it, each writing its data.
//
// A PersistentNode is safe for concurrent use.
type PersistentNode struct {
	path  string // as requested
	mode  zkclient.CreateMode
	renew func(context.Context) (*Session, error)
	keep  bool // Close leaves the node (a TTL node's parent)

	cancel  context.CancelFunc // stops run
	created chan struct{}      // closed when the node was first made
	done    chan struct{}      // closed when run returns

	opMu sync.Mutex // serialises creates and SetData's writes, so a re-creation carries the latest data

	mu      sync.Mutex
	s       *Session
	actual  string // the node's path once made (with its sequence number)
	czxid   int64  // the creation zxid of the node at actual that is ours (made, or taken over)
	present bool   // the node was last seen there, ours
	unsent  bool   // SetData changed data while no node was present, after the last create took its data
	prefix  string // protected prefix of a sequential node's first create
	data    []byte
	owned   []*Session // sessions renew returned
	err     error      // why run stopped
	closed  bool
	// beforeWatch is a test hook: it runs after the node is made or
	// taken over and before the watch on it is set.
	beforeWatch func()
}

// CreatePersistentNode creates the node at path with data in mode on the
// session s and keeps it until Close. mode is Ephemeral,
// EphemeralSequential, Persistent, PersistentSequential or Container; the
// TTL modes are for CreatePersistentTTLNode. A sequential node gets its
// number once, at the first create (with Curator's protected prefix,
// "_c_<uuid>-", before the last segment, so that a create whose answer was
// lost is found again); it is re-created under that same name. It returns
// once the node exists (after waiting, if need be, for another session's
// ephemeral node of that name to go), or with an error when ctx ends first
// or the node cannot be made; then nothing of it is left on the server.
func CreatePersistentNode(ctx context.Context, s *Session, path string, data []byte, mode zkclient.CreateMode, opts ...NodeOption) (*PersistentNode, error) {
	cfg := nodeConfig{mode: mode}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	switch cfg.mode {
	case zkclient.Persistent, zkclient.Ephemeral, zkclient.PersistentSequential, zkclient.EphemeralSequential, zkclient.Container:
	default:
		return nil, errorf("persistent node %s: %w: create mode %d", path, ErrInvalidArgument, cfg.mode)
	}
	n := newPersistentNode(s, path, data, cfg)
	return n.start(ctx)
}

func newPersistentNode(s *Session, path string, data []byte, cfg nodeConfig) *PersistentNode {
	n := &PersistentNode{
		path: path, mode: cfg.mode, renew: cfg.renew,
		created: make(chan struct{}), done: make(chan struct{}),
		s: s, data: bytes.Clone(data),
	}
	if cfg.mode.Sequential() {
		n.prefix = "_c_" + uuid.NewString() + "-"
	}
	return n
}

// start runs the node and waits for its first creation.
func (n *PersistentNode) start(ctx context.Context) (*PersistentNode, error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf("create persistent node %s: %w", n.path, err) // nothing sent
	}
	bctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go n.run(bctx)
	select {
	case <-n.created:
		return n, nil
	case <-n.done:
		err := n.Err()
		n.Close(ctx)
		return nil, errorf("create persistent node %s: %w", n.path, err)
	case <-ctx.Done():
		n.Close(ctx)
		return nil, errorf("create persistent node %s: %w", n.path, ctx.Err())
	}
}

// Path returns the node's path: the path given, or, for a sequential node,
// the path with the protected prefix and the sequence number it got.
func (n *PersistentNode) Path() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.actual
}

// Data returns the data the node is kept with.
func (n *PersistentNode) Data() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return bytes.Clone(n.data)
}

// Session returns the session the node is currently kept on.
func (n *PersistentNode) Session() *Session {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.s
}

// Done returns a channel that is closed when the node is no longer kept:
// after Close, or when its session ended without WithSessionRenewal, or
// on an error that another attempt would meet again (an ACL that refuses
// the create, say). Err says why.
func (n *PersistentNode) Done() <-chan struct{} { return n.done }

// Err returns nil while the node is kept, and when it was kept until
// Close; otherwise why it is no longer kept: an error wrapping
// ErrSessionExpired or ErrSessionClosed, or the error that stopped it.
func (n *PersistentNode) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// SetData replaces the node's data: it writes it to the node, and a later
// re-creation uses it. While the node is missing (being re-created, or its
// session being renewed), or another session's node has the name, it only
// records the data, which the new node then carries. (ZooKeeper cannot
// make a write conditional on a node's owner: if the node is replaced by
// another session's in the moment between the last look at it and the
// write, that node gets the data.) It returns an error wrapping ErrNotHeld
// once the node is no longer kept (Done is closed).
func (n *PersistentNode) SetData(ctx context.Context, data []byte) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	n.mu.Lock()
	if n.closed || n.err != nil {
		n.mu.Unlock()
		return errorf("set data of persistent node %s: %w: the node is no longer kept", n.path, ErrNotHeld)
	}
	n.data = bytes.Clone(data)
	s, p, present := n.s, n.actual, n.present
	if !present {
		n.unsent = true
	}
	n.mu.Unlock()
	if !present {
		return nil // the re-creation (or keepOn, if a create is done already) will carry the data
	}
	_, err := s.setData(ctx, p, data, -1)
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		n.mu.Lock()
		n.unsent = true
		n.mu.Unlock()
		return nil // the re-creation will carry the data
	case s.Err() != nil && n.renew != nil && errors.Is(s.Err(), ErrSessionExpired):
		return nil // so will the node on the next session
	case err != nil:
		return errorf("set data of persistent node %s: %w", p, err)
	}
	return nil
}

// Close stops keeping the node and deletes it (unless it is now another
// session's ephemeral node; a container that has children is left to the
// server, which removes it once they are gone), even if ctx is already
// cancelled, then closes the sessions WithSessionRenewal made. (Once the
// session is over, without renewal, there is no session to delete a
// persistent node with: it stays.) A node that cannot be deleted
// within the session timeout goes with its session if it is ephemeral;
// Close returns that error. Closing again returns nil.
func (n *PersistentNode) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	<-n.done

	n.mu.Lock()
	s, p, owned := n.s, n.actual, n.owned
	n.mu.Unlock()
	var err error
	if p != "" && !n.keep && s.Err() == nil {
		cctx, cancel := s.cleanupContext(ctx)
		rd, e := s.read(cctx, p, reading{op: readStat})
		st := rd.st
		if e == nil && (st.EphemeralOwner == s.ID() || st.EphemeralOwner == 0 && !n.mode.Ephemeral()) {
			e = s.remove(cctx, p)
		}
		cancel()
		if n.mode == zkclient.Container && errors.Is(e, zkclient.ErrNotEmpty) {
			e = nil // the server removes it once it is empty
		}
		if e != nil && !errors.Is(e, zkclient.ErrNoNode) {
			err = errorf("delete persistent node %s: %w", p, e)
		}
	}
	for _, o := range owned {
		o.Close()
	}
	return err
}

// run keeps the node until ctx ends, renewing the session when it expires.
func (n *PersistentNode) run(ctx context.Context) {
	defer close(n.done)
	for {
		s := n.Session()
		err := n.keepOn(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(s.Err(), ErrSessionExpired) && n.renew != nil {
			next, err := n.renewSession(ctx, s)
			if err != nil {
				return // ctx ended
			}
			n.mu.Lock()
			n.s = next
			n.mu.Unlock()
			continue
		}
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		return
	}
}

// renewSession calls renew until it gives a Session or ctx ends, and
// closes the expired session if it was one renew made.
func (n *PersistentNode) renewSession(ctx context.Context, old *Session) (*Session, error) {
	n.mu.Lock()
	for i, o := range n.owned {
		if o == old {
			n.owned = append(n.owned[:i], n.owned[i+1:]...)
			defer old.Close()
			break
		}
	}
	n.mu.Unlock()
	old.log.Warn("zkrecipes: session expired; renewing it to keep a persistent node", "path", n.path)
	var b backoff
	for {
		s, err := n.renew(ctx)
		if err == nil {
			n.mu.Lock()
			n.owned = append(n.owned, s)
			n.mu.Unlock()
			return s, nil
		}
		old.log.Warn("zkrecipes: renewing the session of a persistent node failed", "path", n.path, "err", err)
		if err := b.wait(ctx, b.next()); err != nil {
			return nil, err
		}
	}
}

// keepOn keeps the node on s until s is over, ctx ends, or an error that
// another attempt would meet again.
func (n *PersistentNode) keepOn(ctx context.Context, s *Session) error {
	for {
		if err := n.ensure(ctx, s); err != nil {
			return err
		}
		n.mu.Lock()
		select {
		case <-n.created:
		default:
			close(n.created)
		}
		p, czxid := n.actual, n.czxid
		n.present = true
		unsent, hook := n.unsent, n.beforeWatch
		n.mu.Unlock()
		if hook != nil {
			hook()
		}
		if unsent {
			// SetData ran after the create took its data and before
			// the node was marked present: write what it set.
			n.opMu.Lock()
			n.mu.Lock()
			data := bytes.Clone(n.data)
			n.unsent = false
			n.mu.Unlock()
			_, err := s.setData(ctx, p, data, -1)
			n.opMu.Unlock()
			if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
				n.mu.Lock()
				n.present = false
				n.mu.Unlock()
				return err
			}
		}
		err := n.watch(ctx, s, p, czxid)
		n.mu.Lock()
		n.present = false
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// own records the node at p, made at czxid, as the node's own.
func (n *PersistentNode) own(p string, czxid int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.actual, n.czxid = p, czxid
}

// target returns where and how the next create goes: the node's own path
// once it is known (a sequential node keeps its name, re-created in the
// non-sequential mode of its kind), else the requested path, with the
// protected prefix if sequential.
func (n *PersistentNode) target() (string, zkclient.CreateMode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.actual != "" && n.mode == zkclient.EphemeralSequential:
		return n.actual, zkclient.Ephemeral
	case n.actual != "" && n.mode == zkclient.PersistentSequential:
		return n.actual, zkclient.Persistent
	case n.actual != "":
		return n.actual, n.mode
	case n.prefix != "":
		i := strings.LastIndexByte(n.path, '/')
		return n.path[:i+1] + n.prefix + n.path[i+1:], n.mode
	}
	return n.path, n.mode
}

// ensure returns once the node exists and is ours on s.
func (n *PersistentNode) ensure(ctx context.Context, s *Session) error {
	lost, missing := false, 0
	for {
		p, mode := n.target()
		n.opMu.Lock()
		n.mu.Lock()
		data := bytes.Clone(n.data)
		n.unsent = false
		n.mu.Unlock()
		made, _, err := s.create(ctx, p, data, creating{mode: mode, wait: s.createWait, stat: true})
		n.opMu.Unlock()
		switch {
		case err == nil:
			n.own(made.Path, made.Stat.Czxid)
			return nil
		case errors.Is(err, ErrConnectionLoss):
			lost = true
			if err := s.awaitUp(ctx); err != nil {
				return err
			}
			if mode.Sequential() {
				if found, err := n.find(ctx, s, p); err != nil || found {
					return err
				}
			}
		case errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.makePath(ctx, parents(p), zkclient.Container, nil); err != nil {
				return err
			}
		case errors.Is(err, zkclient.ErrNodeExists):
			ours, czxid, err := n.existing(ctx, s, p, lost)
			if err != nil {
				return err
			}
			if ours {
				n.own(p, czxid)
				return nil
			}
		default:
			return err
		}
	}
}

// existing decides about a node that is in the way of the create of p: it
// is ours (made by a create of this session whose answer was lost, or a
// persistent node to take over, whose data it then sets), and existing
// returns its creation zxid; or it is another's ephemeral node, whose end
// existing waits for before it returns to create again.
func (n *PersistentNode) existing(ctx context.Context, s *Session, p string, lost bool) (ours bool, czxid int64, err error) {
	rd, err := s.read(ctx, p, reading{op: readStat, watch: true})
	st, ok, w := rd.st, rd.ok, rd.w
	if err != nil {
		return false, 0, err
	}
	if !ok {
		w.stop()
		return false, 0, nil // gone already: create again
	}
	switch owner := st.EphemeralOwner; {
	case owner == s.ID() && lost:
		w.stop()
		return true, st.Czxid, nil
	case owner == 0 && n.mode.Ephemeral():
		w.stop()
		return false, 0, fmt.Errorf("%w: %s exists and is not ephemeral", zkclient.ErrNodeExists, p)
	case owner == 0:
		w.stop()
		n.opMu.Lock()
		defer n.opMu.Unlock()
		st, err := s.setData(ctx, p, n.Data(), -1)
		if errors.Is(err, zkclient.ErrNoNode) {
			return false, 0, nil // deleted meanwhile: create again
		}
		if err != nil {
			return false, 0, err
		}
		return true, st.Czxid, nil
	}
	// Another session's ephemeral node (or another PersistentNode's of
	// this session): wait until it goes.
	select {
	case ev := <-w.event():
		if ev.Type == zkclient.EventNotWatching {
			return false, 0, s.Err()
		}
		return false, 0, nil
	case <-ctx.Done():
		w.stop()
		return false, 0, ctx.Err()
	case <-s.Done():
		return false, 0, s.Err()
	}
}

// find looks, after a lost answer to the first create of a sequential
// node, for the node made with the protected prefix.
func (n *PersistentNode) find(ctx context.Context, s *Session, p string) (bool, error) {
	dir := p[:strings.LastIndexByte(p, '/')]
	if dir == "" {
		dir = "/"
	}
	if err := retry(ctx, s, func() error { return s.c.Sync(ctx, dir) }); err != nil {
		return false, err
	}
	rd, err := s.read(ctx, dir, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if !strings.HasPrefix(k, n.prefix) {
			continue
		}
		q := strings.TrimSuffix(dir, "/") + "/" + k
		rd, err := s.read(ctx, q, reading{op: readStat})
		st := rd.st
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return false, err
		}
		if !n.mode.Ephemeral() || st.EphemeralOwner == s.ID() {
			n.own(q, st.Czxid)
			return true, nil
		}
	}
	return false, nil
}

// watch waits until the node at p is gone (nil: make it again), s is over,
// or ctx ends. A node at p that is not ours any more counts as gone: one
// made at another zxid than czxid, ours (ours was deleted and another
// made, perhaps before the watch was set), or an ephemeral node of
// another session; ensure then takes it over, or waits for it.
func (n *PersistentNode) watch(ctx context.Context, s *Session, p string, czxid int64) error {
	return s.awaitDeleted(ctx, p, readStat, func(st zkclient.Stat) bool {
		return st.Czxid != czxid || n.mode.Ephemeral() && st.EphemeralOwner != s.ID()
	})
}

// ttlTouchName is the name of the child that keeps a PersistentTTLNode
// alive, as in Curator's PersistentTtlNode.
const ttlTouchName = "touch"

// PersistentTTLNode is a node that lives as long as a process keeps it and
// for about a TTL after, in Apache Curator's PersistentTtlNode layout: a
// PersistentNode of the Container kind at the path, holding the data, and
// under it a child "touch" created with a TTL (PersistentWithTTL), whose
// data is written again every half TTL. Once nobody touches it, the server
// removes the child when its TTL has passed since its last change, and
// then the empty container (both at its container check, every minute by
// default). The node may be watched like any other: the touches change
// only the child, so they fire no watch on the node itself.
//
// The server must allow TTL nodes (zookeeper.extendedTypesEnabled=true);
// otherwise CreatePersistentTTLNode fails with an error wrapping
// zkclient.ErrUnimplemented. Keeping the node costs a PersistentNode's
// watch and goroutine, one goroutine more, and a write every half TTL.
//
// A PersistentTTLNode is safe for concurrent use.
type PersistentTTLNode struct {
	n      *PersistentNode
	ttl    time.Duration
	touch  string
	cancel context.CancelFunc
	done   chan struct{}
}

// CreatePersistentTTLNode creates the node at path with data and its touch
// child, with the TTL ttl (given last, as to Session.CreateTTL), on the
// session s, and keeps both until Close. The node is a container; of the
// options, WithSessionRenewal applies. It returns once both exist, or with
// an error (ctx ended, no TTL support) leaving nothing behind.
func CreatePersistentTTLNode(ctx context.Context, s *Session, path string, data []byte, ttl time.Duration, opts ...NodeOption) (*PersistentTTLNode, error) {
	cfg := nodeConfig{mode: zkclient.Container}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if ttl < 2*time.Millisecond {
		return nil, errorf("persistent TTL node %s: %w: TTL %v", path, ErrInvalidArgument, ttl)
	}
	n, err := newPersistentNode(s, path, data, cfg).start(ctx)
	if err != nil {
		return nil, err
	}
	t := &PersistentTTLNode{n: n, ttl: ttl, touch: path + "/" + ttlTouchName, done: make(chan struct{})}
	if err := t.touchOnce(ctx); err != nil {
		// The container goes too, when Close deletes it.
		n.Close(ctx)
		return nil, errorf("create persistent TTL node %s: %w", path, err)
	}
	n.keep = true // from now on Close leaves it to expire
	bctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go t.run(bctx)
	return t, nil
}

// run touches the child every half TTL until ctx ends or the node is no
// longer kept.
func (t *PersistentTTLNode) run(ctx context.Context) {
	defer close(t.done)
	tick := time.NewTicker(t.ttl / 2)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		case <-t.n.Done():
			return
		}
		if err := t.touchOnce(ctx); err != nil && ctx.Err() == nil {
			t.n.Session().log.Warn("zkrecipes: touching a persistent TTL node failed", "path", t.touch, "err", err)
		}
	}
}

// touchOnce writes the touch child, or creates it with the TTL if it is
// missing. A missing parent is no error: the PersistentNode makes it
// again, and the next touch then makes the child.
func (t *PersistentTTLNode) touchOnce(ctx context.Context) error {
	s := t.n.Session()
	_, err := s.setData(ctx, t.touch, nil, -1)
	if !errors.Is(err, zkclient.ErrNoNode) {
		return err
	}
	_, _, err = s.create(ctx, t.touch, nil, creating{mode: zkclient.PersistentWithTTL, ttl: t.ttl, resend: true, existing: true})
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	return err
}

// Path returns the node's path.
func (t *PersistentTTLNode) Path() string { return t.n.Path() }

// Data returns the data the node is kept with.
func (t *PersistentTTLNode) Data() []byte { return t.n.Data() }

// SetData replaces the node's data, as PersistentNode.SetData does.
func (t *PersistentTTLNode) SetData(ctx context.Context, data []byte) error {
	return t.n.SetData(ctx, data)
}

// Done returns a channel that is closed when the node is no longer kept
// (see PersistentNode.Done); Err says why.
func (t *PersistentTTLNode) Done() <-chan struct{} { return t.n.Done() }

// Err returns why the node is no longer kept (see PersistentNode.Err).
func (t *PersistentTTLNode) Err() error { return t.n.Err() }

// Close stops keeping the node and touching its child. It deletes
// nothing: the server removes the child once its TTL has passed, and then
// the node. Closing again returns nil.
func (t *PersistentTTLNode) Close(ctx context.Context) error {
	t.cancel()
	<-t.done
	return t.n.Close(ctx)
}
