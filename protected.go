package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// protectedNode is an ephemeral sequential node made in Curator's
// protected mode: its name starts with a random prefix "_c_<uuid>-", by
// which the session finds it again after a create whose answer was lost.
// The line of contenders' tickets (line.go) and the semaphore's leases are
// such nodes.
type protectedNode struct {
	s      *Session
	dir    string // the parent
	prefix string // protected prefix "_c_<uuid>-"
	name   string // node name once created
	// first is the listing of dir sent right behind the create, without
	// waiting for it (the server answers in order, so it shows the new
	// node): the first look at dir costs no round trip of its own. nil if
	// none.
	first *zkclient.Call[zkclient.Listing]
	czxid int64 // the zxid that created the node; 0 if not known
}

// newProtectedNode returns a node to be made under dir, with the UUID u in
// its prefix, or a new random one if u is "".
func newProtectedNode(s *Session, dir string, u string) protectedNode {
	if u == "" {
		u = uuid.NewString()
	}
	return protectedNode{s: s, dir: dir, prefix: "_c_" + u + "-"}
}

// path returns the node's path ("" before it was created).
func (n *protectedNode) path() string {
	if n.name == "" {
		return ""
	}
	return n.dir + "/" + n.name
}

// create makes the node, named prefix, marker, sequence number, with
// Curator's protected-create recovery: after a connection loss the create
// may or may not have happened, so the parent is searched for a node with
// our random prefix. The first listing of the parent is sent right behind
// the create. On error, leave deletes whatever it may have made.
func (n *protectedNode) create(ctx context.Context, marker string, data []byte) error {
	s := n.s
	made, _, err := s.create(ctx, n.dir+"/"+n.prefix+marker, data, creating{
		mode:    zkclient.EphemeralSequential,
		stat:    true,
		parents: true,
		resend:  true,
		wait:    s.createWait,
		sent: func() {
			s.stats.listings.Add(1)
			n.first = s.c.ChildrenAsync(n.dir)
		},
		recover: func(ctx context.Context) (string, error) {
			n.first = nil
			name, err := n.find(ctx)
			if name == "" {
				return "", err
			}
			return n.dir + "/" + name, err
		},
	})
	if err != nil {
		n.first = nil
		return errorf("create in %s: %w", n.dir, err)
	}
	n.name = made.Path[len(n.dir)+1:]
	n.czxid = made.Stat.Czxid
	return nil
}

// find looks for the node created with the prefix. A node with the prefix
// that another session owns is never taken as ours: it is deleted.
func (n *protectedNode) find(ctx context.Context) (string, error) {
	s := n.s
	if err := retry(ctx, s, func() error { return s.c.Sync(ctx, n.dir) }); err != nil {
		return "", err
	}
	rd, err := s.read(ctx, n.dir, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return "", nil // the parent (a container) is gone, and our node with it
	}
	if err != nil {
		return "", err
	}
	for _, k := range kids {
		if !strings.HasPrefix(k, n.prefix) {
			continue
		}
		p := n.dir + "/" + k
		rd, err := s.read(ctx, p, reading{op: readStat})
		st := rd.st
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

// list returns the parent's children and Stat: the listing sent behind
// the create the first time, a new one after that.
func (n *protectedNode) list(ctx context.Context) ([]string, zkclient.Stat, error) {
	if first := n.first; first != nil {
		n.first = nil
		if l, err := first.Wait(ctx); err == nil {
			return l.Names, l.Stat, nil
		} else if ctx.Err() != nil {
			return nil, zkclient.Stat{}, err
		}
	}
	r, err := n.s.read(ctx, n.dir, reading{op: readChildren})
	return r.kids, r.st, err
}

// leave deletes the node, even when ctx has ended (with a fresh context
// bounded by the session timeout), retrying across connection loss while
// the session lives. If the node's name is unknown (a create whose answer
// was lost), every node with the prefix is deleted.
//
// When the server cannot be reached within the session timeout (a lost
// quorum does not expire sessions), leave returns an error wrapping
// ErrReleaseUnconfirmed and the Session goes on deleting the node in the
// background until it is gone or the session ends: a node left by a
// failed Lock or an unconfirmed Unlock would otherwise block every other
// contender for as long as the session lives.
func (n *protectedNode) leave(ctx context.Context) error {
	s := n.s
	if s.Err() != nil {
		return s.Err() // the server removed the node with the session
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	err := n.remove(cctx)
	if err != nil && cctx.Err() != nil && s.Err() == nil {
		s.removeLater(n.remove)
		return fmt.Errorf("%w: %s, after trying for %v (%v); deleting it in the background", ErrReleaseUnconfirmed, n.path(), s.Timeout(), err)
	}
	return err
}

func (n *protectedNode) remove(ctx context.Context) error {
	s := n.s
	if n.name != "" {
		return s.remove(ctx, n.path())
	}
	rd, err := s.read(ctx, n.dir, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if strings.HasPrefix(k, n.prefix) {
			if err := s.remove(ctx, n.dir+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}
