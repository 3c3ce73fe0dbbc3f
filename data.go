package zkrecipes

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zkpath"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The data plane: a Session reads and writes nodes of the caller's own on
// the connection its recipes use, so a program needs no second client.
//
// Paths are checked before any request (an error wrapping ErrInvalidPath).
// Failures are the client's errors, which name the operation and the path
// and match the server's codes with errors.Is (zkclient.ErrNoNode,
// zkclient.ErrNodeExists, zkclient.ErrBadVersion, zkclient.ErrNotEmpty,
// zkclient.ErrNoAuth...), or ErrSessionExpired / ErrSessionClosed.
//
// Reads (Get, Children, Exists, GetACL, and the watching reads) are
// sent again after a connection loss, while ctx allows and the session
// lives: they change nothing. Writes are not: a write whose answer was lost
// may or may not have been applied, so it returns an error wrapping
// ErrConnectionLoss and the caller decides (a versioned Set or Delete, or a
// Multi with a check, can be retried safely). CreateParents is the
// exception: each parent's create is retried, since a parent that exists
// is what it wants.

// Create creates the node path with data (nil: no data), in mode, with acl,
// and returns the path made (with the number of a sequential mode) and the
// node's Stat, as zkclient.Client.Create does. What the Session adds: a nil
// acl is the Session's ACL (WithACL). A missing parent is an error wrapping
// zkclient.ErrNoNode: make the parents with CreateParents. The TTL modes
// are for CreateTTL.
func (s *Session) Create(ctx context.Context, path string, data []byte, mode zkclient.CreateMode, acl []zkclient.ACL) (zkclient.Created, error) {
	return s.CreateTTL(ctx, path, data, mode, acl, 0)
}

// CreateTTL creates a node of a TTL mode (zkclient.PersistentWithTTL,
// PersistentSequentialWithTTL), which the server deletes once it has had
// no children and no change for ttl, as zkclient.Client.CreateTTL does; a
// nil acl is the Session's. The server must run with extendedTypesEnabled
// (ZooKeeper 3.5.3+); otherwise the create fails with
// zkclient.ErrUnimplemented.
func (s *Session) CreateTTL(ctx context.Context, path string, data []byte, mode zkclient.CreateMode, acl []zkclient.ACL, ttl time.Duration) (zkclient.Created, error) {
	made, _, err := s.create(ctx, path, data, creating{mode: mode, ttl: ttl, acl: acl, stat: true})
	return made, err
}

// CreateParents creates the missing ancestors of path (not path itself),
// with no data, in mode (zkclient.Persistent, or zkclient.Container for
// ancestors the server deletes once they are empty, the way the recipes
// make their directories) and with acl (nil: the Session's). Zookeeper has
// no such operation: the Session sends one create per ancestor, from the
// root down, and again after a connection loss (an ancestor that exists is
// what it wants). It costs one create per ancestor.
func (s *Session) CreateParents(ctx context.Context, path string, mode zkclient.CreateMode, acl []zkclient.ACL) error {
	if err := checkPath(path); err != nil {
		return err
	}
	return s.makePath(ctx, parents(path), mode, acl)
}

// Get returns the node's data (nil for a node created with null data) and
// its Stat, as zkclient.Client.Get does; the Session sends it again after a
// connection loss.
func (s *Session) Get(ctx context.Context, path string) ([]byte, zkclient.Stat, error) {
	r, err := s.read(ctx, path, reading{op: readData})
	return r.data, r.st, err
}

// Set writes the node's data if its version is version (-1: any version)
// and returns its new Stat. A version that does not match is an error
// wrapping zkclient.ErrBadVersion, and nothing is written.
func (s *Session) Set(ctx context.Context, path string, data []byte, version int32) (zkclient.Stat, error) {
	return s.c.Set(ctx, path, data, version)
}

// Delete deletes the node if its version is version (-1: any version). A
// node with children is not deleted (zkclient.ErrNotEmpty); see DeleteTree.
func (s *Session) Delete(ctx context.Context, path string, version int32) error {
	s.stats.deletes.Add(1)
	return s.c.Delete(ctx, path, version)
}

// DeleteTree deletes the node and everything under it, whatever the
// versions, children first. Nodes that others create under it meanwhile
// are deleted too, until none is left (so it does not finish against a
// writer that never stops adding); a node already gone counts as
// deleted, and a path that does not exist is an error wrapping
// zkclient.ErrNoNode. It is not atomic: a failure (ErrNoAuth, a lost
// session) can leave part of the tree. It costs one listing and one delete
// per node.
func (s *Session) DeleteTree(ctx context.Context, path string) error {
	if _, err := s.read(ctx, path, reading{op: readStat}); err != nil {
		return err
	}
	return s.deleteTree(ctx, path)
}

func (s *Session) deleteTree(ctx context.Context, p string) error {
	for {
		r, err := s.read(ctx, p, reading{op: readChildren})
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range r.kids {
			if err := s.deleteTree(ctx, zkpath.Join(p, k)); err != nil {
				return err
			}
		}
		err = s.remove(ctx, p)
		if !errors.Is(err, zkclient.ErrNotEmpty) {
			return err
		}
		// A child appeared since the listing: list again.
	}
}

// Children returns the names of the node's children and the node's Stat,
// as zkclient.Client.Children does; the Session sorts the names and sends
// the request again after a connection loss.
func (s *Session) Children(ctx context.Context, path string) ([]string, zkclient.Stat, error) {
	r, err := s.read(ctx, path, reading{op: readChildren})
	slices.Sort(r.kids)
	return r.kids, r.st, err
}

// Exists returns the node's Stat and true, or false (and no error) if
// there is no node at path, as zkclient.Client.Exists does; the Session
// sends it again after a connection loss.
func (s *Session) Exists(ctx context.Context, path string) (zkclient.Stat, bool, error) {
	r, err := s.read(ctx, path, reading{op: readStat})
	if errors.Is(err, zkclient.ErrNoNode) {
		return zkclient.Stat{}, false, nil
	}
	return r.st, err == nil, err
}

// Sync makes the server this session is connected to catch up with the
// ensemble's leader on path before answering, so that a read sent after
// Sync returns sees every write the ensemble had applied when Sync was
// sent (ZooKeeper's reads are otherwise only as fresh as the server).
func (s *Session) Sync(ctx context.Context, path string) error {
	return s.c.Sync(ctx, path)
}

// GetACL returns the node's ACL and Stat, as zkclient.Client.GetACL does;
// the Session sends it again after a connection loss.
func (s *Session) GetACL(ctx context.Context, path string) ([]zkclient.ACL, zkclient.Stat, error) {
	var acl []zkclient.ACL
	var st zkclient.Stat
	err := retry(ctx, s, func() (err error) {
		acl, st, err = s.c.GetACL(ctx, path)
		return err
	})
	return acl, st, err
}

// SetACL replaces the node's ACL if its ACL version (Stat.Aversion) is
// version (-1: any).
func (s *Session) SetACL(ctx context.Context, path string, acl []zkclient.ACL, version int32) (zkclient.Stat, error) {
	return s.c.SetACL(ctx, path, acl, version)
}

// Multi applies ops as one transaction: all of them, in order, or none. It
// returns one result per op; when the transaction fails, the error names
// the first op that failed and each result's Err says what happened to it.
// Ops are made by the client (s.Client().CreateOp, SetOp, DeleteOp,
// CheckOp) and by the recipes' holding checks (Mutex.HeldOp and the
// like), which make a write conditional on still holding a lock.
func (s *Session) Multi(ctx context.Context, ops ...zkclient.Op) ([]zkclient.OpResult, error) {
	return s.c.Multi(ctx, ops...)
}

// GetW returns the node's data and Stat and sets a one-shot watch on it,
// which fires once, when the node's data changes or the node is deleted.
// The watch's channel never drops its event; Remove it when no longer
// waiting. A missing node is an error wrapping zkclient.ErrNoNode, and no
// watch is set. As zkclient.Client.GetW, sent again after a connection loss.
func (s *Session) GetW(ctx context.Context, path string) ([]byte, zkclient.Stat, *zkclient.Watch, error) {
	r, err := s.read(ctx, path, reading{op: readData, watch: true})
	return r.data, r.st, r.w.w, err
}

// ExistsW returns the node's Stat and whether it exists, and sets a one-shot
// watch that fires when it is created, changed or deleted. As
// zkclient.Client.ExistsW, sent again after a connection loss.
func (s *Session) ExistsW(ctx context.Context, path string) (zkclient.Stat, bool, *zkclient.Watch, error) {
	r, err := s.read(ctx, path, reading{op: readStat, watch: true})
	return r.st, r.ok && err == nil, r.w.w, err
}

// ChildrenW returns the node's children and its Stat, and sets a one-shot
// watch that fires when a child is created or deleted, or the node is
// deleted. As zkclient.Client.ChildrenW; the Session sorts the names and
// sends the request again after a connection loss.
func (s *Session) ChildrenW(ctx context.Context, path string) ([]string, zkclient.Stat, *zkclient.Watch, error) {
	r, err := s.read(ctx, path, reading{op: readChildren, watch: true})
	slices.Sort(r.kids)
	return r.kids, r.st, r.w.w, err
}

// AddWatch sets a persistent watch on path (ZooKeeper 3.6+): every change
// of the node (with recursive, of every node under it too) is delivered,
// in order, none dropped, until Remove or the session's end. It survives
// reconnections (as zkclient.Client.AddWatch; the Session sends the
// request again after a connection loss). Node creations, data changes and
// deletions are reported; a recursive watch reports no child-list changes
// (the creations and deletions say it all).
func (s *Session) AddWatch(ctx context.Context, path string, recursive bool) (*zkclient.PersistentWatch, error) {
	var w *zkclient.PersistentWatch
	err := retry(ctx, s, func() (err error) {
		w, err = s.c.AddWatch(ctx, path, recursive)
		return err
	})
	return w, err
}
