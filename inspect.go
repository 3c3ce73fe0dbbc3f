package zkrecipes

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// QueueEntry is one contender queued under a lock or election path, as
// Inspect saw it.
type QueueEntry struct {
	Node string // node name, relative to the path
	Seq  int32  // the node's sequence number: its place in the queue

	// Kind is how the contender counts: "mutex" (an exclusive lock),
	// "reader" or "writer" (a read/write lock), or "candidate" (an
	// election). An exclusive node in a queue that also has readers or
	// writers counts as a writer there, and is reported as one: a Mutex's
	// node on an RWMutex's path, or kazoo's WriteLock, whose nodes are
	// named like its Lock's.
	Kind string

	Data    []byte    // the node's data: the contender's id, for zkr and Curator
	Owner   int64     // the session that owns the node; 0 if it is not ephemeral
	Created time.Time // when the node was created, by the server's clock

	// Holds tells that nothing queued before the contender blocks it: it
	// holds the lock or leads (or will as soon as its owner notices).
	Holds bool
	// WaitsFor is the index, in QueueView.Entries, of the entry this
	// contender waits for (and watches), or -1 when it holds.
	WaitsFor int
}

// QueueView is a snapshot of the contenders queued under one path.
type QueueView struct {
	Path    string
	Exists  bool         // whether the path exists
	Entries []QueueEntry // the contenders, in queue order
	Others  []string     // the children that are not contenders, sorted
}

// Inspect returns the queue under path as the lock and election recipes
// (Mutex, RWMutex, Election, and the Curator and kazoo recipes they
// interoperate with) see it: the contenders in their order, who holds or
// leads, and whom each waiter waits for. It only reads, and needs no
// contender of its own on path.
//
// The view is a snapshot taken with one listing of path, then one read per
// contender; a contender that leaves between the two is left out, and
// Holds and WaitsFor are decided among those that remain. A path that does
// not exist gives an empty view with Exists false.
func Inspect(ctx context.Context, s *Session, path string) (QueueView, error) {
	v := QueueView{Path: path}
	if err := checkPath(path); err != nil {
		return v, err
	}
	q := &queue{s: s, dir: path, kinds: queueKinds}
	kids, err := s.children(ctx, path)
	if errors.Is(err, zkclient.ErrNoNode) {
		return v, nil
	}
	if err != nil {
		return v, errorf("inspect %s: %w", path, err)
	}
	v.Exists = true
	cs, err := q.sorted(kids)
	if err != nil {
		return v, errorf("inspect %s: %w", path, err)
	}
	for _, k := range kids {
		if _, ok := parseContender(k, q.kinds); !ok {
			v.Others = append(v.Others, k)
		}
	}
	slices.Sort(v.Others)

	live := cs[:0] // the contenders still there when read
	rw := false    // whether readers or writers are queued
	for _, c := range cs {
		data, st, err := s.getData(ctx, path+"/"+c.name)
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // left meanwhile
		}
		if err != nil {
			return v, errorf("inspect %s: %w", path, err)
		}
		k := kindOf(c.name)
		rw = rw || k.reader || k == writerKind
		live = append(live, c)
		v.Entries = append(v.Entries, QueueEntry{
			Node:    c.name,
			Seq:     c.seq,
			Kind:    kindName(k),
			Data:    data,
			Owner:   st.EphemeralOwner,
			Created: time.UnixMilli(st.Ctime),
		})
	}
	for i := range v.Entries {
		en := &v.Entries[i]
		en.WaitsFor = blocker(live, i)
		en.Holds = en.WaitsFor < 0
		if rw && en.Kind == "mutex" {
			en.Kind = "writer"
		}
	}
	return v, nil
}
