package zkrecipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Member is one member of a group: its id and the data it published.
type Member struct {
	ID   string
	Data []byte
}

// Group is this session's membership in a group on a ZooKeeper path,
// compatible with Apache Curator's GroupMember: each member is an ephemeral
// node "<path>/<memberID>" whose data is the member's payload. Every direct
// child of the path counts as a member. The membership ends when Leave is
// called or the session ends; Lost tells when it is void.
//
// A Group's methods are safe to call concurrently.
type Group struct {
	s    *Session
	dir  string
	id   string
	node string

	mu   sync.Mutex
	h    *nodeHold
	left bool
}

// JoinGroup makes the session a member of the group on path under memberID,
// publishing data, and returns the membership. The member id must be one
// path segment. If a member with that id exists, JoinGroup returns an error
// wrapping ErrMemberExists, whoever made it (another session, or another
// JoinGroup of this session): a live member is never taken over. An id is
// free again once its member left or its session ended.
func JoinGroup(ctx context.Context, s *Session, path, memberID string, data []byte) (*Group, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if memberID == "" || memberID == "." || memberID == ".." || strings.Contains(memberID, "/") {
		return nil, errorf("join %s: %w: member id %q is not one path segment", path, ErrInvalidArgument, memberID)
	}
	node := path + "/" + memberID
	if err := checkPath(node); err != nil {
		return nil, errorf("join %s: %w: member id %q: %v", path, ErrInvalidArgument, memberID, err)
	}
	a := s.queued(ctx, "member", path)
	if err := createEphemeral(ctx, s, node, data); err != nil {
		a.abandoned(err)
		return nil, errorf("join %s as %q: %w", path, memberID, err)
	}
	return &Group{s: s, dir: path, id: memberID, node: node, h: a.granted(s, node, 0, 0)}, nil
}

// createEphemeral makes the ephemeral node p (and its parents as
// containers). After a connection loss, a node that exists and belongs to
// this session is the one the lost attempt made; without a loss, an
// existing node is never ours. When it fails after an attempt whose answer
// was lost, the node that attempt may have made is deleted in the
// background (see Session.removeOwnLater).
func createEphemeral(ctx context.Context, s *Session, p string, data []byte) (err error) {
	lost := false
	defer func() {
		if err != nil && lost && !errors.Is(err, ErrMemberExists) {
			s.removeOwnLater(p)
		}
	}()
	for {
		_, l, err := s.create(ctx, p, data, creating{mode: zkclient.Ephemeral, parents: true, resend: true, wait: s.createWait})
		lost = lost || l
		if !errors.Is(err, zkclient.ErrNodeExists) {
			return err
		}
		rd, err := s.read(ctx, p, reading{op: readStat})
		st := rd.st
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // gone meanwhile: try again
		}
		if err != nil {
			return err
		}
		if lost && st.EphemeralOwner == s.ID() {
			return nil
		}
		return fmt.Errorf("%w: %s exists (owner session 0x%x)", ErrMemberExists, p, st.EphemeralOwner)
	}
}

// ID returns the member id.
func (g *Group) ID() string { return g.id }

// Update replaces this member's data. It returns an error wrapping
// ErrNotHeld after Leave, one wrapping ErrNodeLost if the member's node is
// gone (Lost is closed), and one wrapping ErrSessionExpired if the session
// expired.
func (g *Group) Update(ctx context.Context, data []byte) error {
	if err := g.check(); err != nil {
		return errorf("update member %q of %s: %w", g.id, g.dir, err)
	}
	st, err := g.s.setData(ctx, g.node, data, -1)
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		if e := g.s.Err(); e != nil {
			err = e
		} else {
			err = fmt.Errorf("%w: %s", ErrNodeLost, g.node)
		}
	case err == nil && st.EphemeralOwner != g.s.ID():
		// Our node was deleted and the id taken meanwhile.
		err = fmt.Errorf("%w: %s belongs to session 0x%x", ErrNotOwner, g.node, st.EphemeralOwner)
	}
	if err != nil {
		return errorf("update member %q of %s: %w", g.id, g.dir, err)
	}
	return nil
}

// check reports why the membership cannot be used: left, session over, or
// node gone.
func (g *Group) check() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left {
		return ErrNotHeld
	}
	if err := g.s.Err(); err != nil {
		return err
	}
	select {
	case <-g.h.lost:
		return fmt.Errorf("%w: %s", ErrNodeLost, g.node)
	default:
		return nil
	}
}

// Leave ends the membership by deleting the member's node, even if ctx is
// already cancelled; a node of that name made by another session (after
// ours was deleted by someone else) is left alone. Lost is closed first.
// It returns an error wrapping ErrNotHeld if called again, and one wrapping
// ErrSessionExpired if the session expired meanwhile (the membership had
// ended already).
func (g *Group) Leave(ctx context.Context) error {
	g.mu.Lock()
	if g.left {
		g.mu.Unlock()
		return errorf("leave %s as %q: %w", g.dir, g.id, ErrNotHeld)
	}
	g.left = true
	h := g.h
	g.mu.Unlock()

	held := h.quit()
	// The id may belong to another member by now, if ours was deleted by
	// someone else: only our session's node is removed.
	err := g.s.removeOwn(ctx, g.node)
	if err != nil {
		err = errorf("leave %s as %q: %w", g.dir, g.id, err)
	}
	h.released(held, err)
	return err
}

// Lost returns a channel that is closed when the membership is void: left,
// the session expired or was closed, the member's node was deleted by
// someone else, or (in strict mode, see WithStrict) the connection was down
// long enough that the session may have expired.
func (g *Group) Lost() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.h.lost
}

// Members returns the group's current members, sorted by id, like
// GroupMembers.
func (g *Group) Members(ctx context.Context) ([]Member, error) {
	return GroupMembers(ctx, g.s, g.dir)
}

// Watch follows the group's members, like [WatchGroup].
func (g *Group) Watch(ctx context.Context) (*Stream[[]Member], error) {
	return WatchGroup(ctx, g.s, g.dir)
}

// GroupMembers returns the current members of the group on path, sorted by
// id. It only reads: the session need not be a member. It lists the group,
// then reads each member's data; a member that leaves in between is left
// out. A group that does not exist has no members.
func GroupMembers(ctx context.Context, s *Session, path string) ([]Member, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	rd, err := s.read(ctx, path, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("members of %s: %w", path, err)
	}
	slices.Sort(kids)
	ms := make([]Member, 0, len(kids))
	for _, k := range kids {
		rd, err := s.read(ctx, path+"/"+k, reading{op: readData})
		data := rd.data
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, errorf("members of %s: %w", path, err)
		}
		ms = append(ms, Member{ID: k, Data: data})
	}
	return ms, nil
}

// WatchGroup follows the members of the group on path, sorted by id, as a
// [Stream]: its first Next returns the members when the watch was set, and
// each later one the members after a change, a member joined or left (also
// by its session ending) or updated its data, merged with the changes made
// before Next was called. A group that does not exist has no members, and
// is followed until it is created. The session need not be a member.
//
// WatchGroup reads the group before it returns (ctx bounds that read
// only); it returns an error for an invalid path or when that read fails.
// The stream costs one watch on the group and one on each member.
func WatchGroup(ctx context.Context, s *Session, path string) (*Stream[[]Member], error) {
	return watchGroup(ctx, s, path, "watch group "+path, func(ms []Member) []Member { return ms }, sameMembers)
}

// watchGroup follows the group on dir as a stream of conv(members).
func watchGroup[T any](ctx context.Context, s *Session, dir, what string, conv func([]Member) T, same func(a, b T) bool) (*Stream[T], error) {
	if err := checkPath(dir); err != nil {
		return nil, errorf("%s: %w", what, err)
	}
	w := &groupWatch{
		wake:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
		fired: make(map[string]bool),
		armed: make(map[string]watched),
		data:  make(map[string][]byte),
	}
	ms, err := w.refresh(ctx, s, dir)
	if err != nil {
		w.stop()
		return nil, errorf("%s: %w", what, err)
	}
	st := newStream(conv(ms), same)
	st.run(s, what, func(ctx context.Context) error {
		defer w.stop()
		for {
			select {
			case <-w.wake:
			case <-ctx.Done():
				return ctx.Err()
			case <-s.Done():
				return s.Err()
			}
			ms, err := w.refresh(ctx, s, dir)
			if err != nil {
				return err
			}
			st.emit(conv(ms), 0)
		}
	})
	return st, nil
}

func sameMembers(a, b []Member) bool {
	return slices.EqualFunc(a, b, func(a, b Member) bool { return a.ID == b.ID && bytes.Equal(a.Data, b.Data) })
}

// groupWatch keeps one watch on the group's children (or on the group's
// path while it does not exist) and one data watch on each member, and
// re-arms only the watches that fired.
type groupWatch struct {
	wake chan struct{} // poked when a watch fires
	quit chan struct{} // closed when the watching ends

	mu         sync.Mutex
	childFired bool
	fired      map[string]bool // members whose data watch fired

	child      watched // the group's watch (valid if childArmed)
	childArmed bool
	names      []string           // last listing
	armed      map[string]watched // members with a data watch outstanding
	data       map[string][]byte  // members' data as last read
}

// stop ends the forwarding and removes the watches still outstanding.
func (w *groupWatch) stop() {
	close(w.quit)
	if w.childArmed {
		w.child.stop()
	}
	for _, dw := range w.armed {
		dw.stop()
	}
}

// forward waits (until the watching ends) for one watch event and
// records it.
func (w *groupWatch) forward(ch <-chan zkclient.Event, member string) {
	go func() {
		select {
		case <-ch:
		case <-w.quit:
			return
		}
		w.mu.Lock()
		if member == "" {
			w.childFired = true
		} else {
			w.fired[member] = true
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}()
}

// refresh re-arms the watches that fired and returns the members.
func (w *groupWatch) refresh(ctx context.Context, s *Session, dir string) ([]Member, error) {
	w.mu.Lock()
	if w.childFired {
		w.childArmed, w.childFired = false, false
	}
	for m := range w.fired {
		delete(w.armed, m)
	}
	clear(w.fired)
	w.mu.Unlock()

	for !w.childArmed {
		rd, err := s.read(ctx, dir, reading{op: readChildren, watch: true})
		kids, cw := rd.kids, rd.w
		if errors.Is(err, zkclient.ErrNoNode) {
			rd, err = s.read(ctx, dir, reading{op: readStat, watch: true})
			cw = rd.w
			if err == nil && rd.ok {
				cw.stop()
				continue // created meanwhile: list it
			}
		}
		if err != nil {
			return nil, err
		}
		w.forward(cw.event(), "")
		w.child, w.childArmed, w.names = cw, true, kids
	}
	ms := make([]Member, 0, len(w.names))
	for _, k := range w.names {
		if _, ok := w.armed[k]; !ok {
			rd, err := s.read(ctx, dir+"/"+k, reading{op: readData, watch: true})
			data, dw := rd.data, rd.w
			if errors.Is(err, zkclient.ErrNoNode) {
				delete(w.data, k) // left; the child watch tells
				continue
			}
			if err != nil {
				return nil, err
			}
			w.forward(dw.event(), k)
			w.armed[k], w.data[k] = dw, data
		}
		if d, ok := w.data[k]; ok {
			ms = append(ms, Member{ID: k, Data: d})
		}
	}
	for k := range w.data {
		if !slices.Contains(w.names, k) {
			delete(w.data, k)
		}
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return ms, nil
}
