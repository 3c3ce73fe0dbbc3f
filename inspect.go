package zkrecipes

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Contender is one contender in line under a lock or election path, as
// Inspect saw it.
type Contender struct {
	Node string // node name, relative to the path
	Seq  int32  // the node's sequence number: its place in the line

	// Kind is how the contender counts: "mutex" (an exclusive lock),
	// "reader" or "writer" (a read/write lock), or "candidate" (an
	// election). An exclusive node in a line that also has readers or
	// writers counts as a writer there, and is reported as one: a Mutex's
	// node on an RWMutex's path, or kazoo's WriteLock, whose nodes are
	// named like its Lock's.
	Kind string

	// Layout is the naming the node follows, which tells which client
	// made it: "curator" ("_c_<uuid>-lock-<seq>" and the like: Apache
	// Curator's, which this package's recipes write too), "kazoo"
	// ("<id>__lock__<seq>", "<id>__rlock__<seq>"), or "" for another (a
	// marker without Curator's prefix, as ZooKeeper's own recipe or a
	// hand-made node).
	Layout string

	// Grants tells that the contender takes grants (see WithGrants): its
	// name carries a version-8 UUID, and a holder of its kind that knows
	// it is next releases to it by grant rather than by a plain delete.
	Grants bool

	Data    []byte    // the node's data: the contender's id, for zkr and Curator
	Owner   int64     // the session that owns the node; 0 if it is not ephemeral
	Created time.Time // when the node was created, by the server's clock

	// Holds tells that nothing in line before the contender blocks it: it
	// holds the lock or leads (or will as soon as its owner notices).
	Holds bool
	// WaitsFor is the index, in Contenders.Entries, of the entry this
	// contender waits for (and watches), or -1 when it holds.
	WaitsFor int
}

// Contenders is a snapshot of the line of contenders under one path.
type Contenders struct {
	Path    string
	Exists  bool        // whether the path exists
	Entries []Contender // the contenders, in line order
	Others  []string    // the children that are not contenders, sorted
}

// Inspect returns the line of contenders under path as the lock and election recipes
// (Mutex, RWMutex, Election, and the Curator and kazoo recipes they
// interoperate with) see it: the contenders in their order, who holds or
// leads, and whom each waiter waits for. It only reads, and needs no
// contender of its own on path.
//
// The view is a snapshot taken with one listing of path, then one read per
// contender; a contender that leaves between the two is left out, and
// Holds and WaitsFor are decided among those that remain. A path that does
// not exist gives an empty view with Exists false.
func Inspect(ctx context.Context, s *Session, path string) (Contenders, error) {
	v := Contenders{Path: path}
	if err := checkPath(path); err != nil {
		return v, err
	}
	q := &line{s: s, dir: path, kinds: lineKinds}
	rd, err := s.read(ctx, path, reading{op: readChildren})
	kids := rd.kids
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
	rw := false    // whether readers or writers are in line
	for _, c := range cs {
		rd, err := s.read(ctx, path+"/"+c.name, reading{op: readData})
		data, st := rd.data, rd.st
		if errors.Is(err, zkclient.ErrNoNode) {
			continue // left meanwhile
		}
		if err != nil {
			return v, errorf("inspect %s: %w", path, err)
		}
		k := kindOf(c.name)
		rw = rw || k.reader || k == writerKind
		live = append(live, c)
		v.Entries = append(v.Entries, Contender{
			Node:    c.name,
			Seq:     c.seq,
			Kind:    kindName(k),
			Layout:  layoutOf(c.name),
			Grants:  takesGrants(c.name, k),
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
