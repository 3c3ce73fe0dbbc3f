package zkserver

import (
	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// event is a change that may trigger watches.
type event struct {
	typ  int32
	path string
}

// txn applies changes to the tree for one zxid. It records how to undo
// them (a failed multi rolls back) and the watch events they cause, which
// fire only when the transaction commits.
type txn struct {
	t      *tree
	zxid   int64
	now    int64 // milliseconds since the epoch
	undo   []func()
	events []event

	// For the transaction log: the nodes changed, in the order first
	// changed, and the session the transaction closes (or 0).
	touched []touched
	closed  int64
}

// touched is a node a transaction changes: all of it, or (a parent whose
// children changed) only its stat and sequence counter.
type touched struct {
	path     string
	statOnly bool
}

// touch notes that the transaction changes the node at p.
func (x *txn) touch(p string, statOnly bool) {
	for i := range x.touched {
		if x.touched[i].path == p {
			x.touched[i].statOnly = x.touched[i].statOnly && statOnly
			return
		}
	}
	x.touched = append(x.touched, touched{p, statOnly})
}

// rollback undoes every change of the transaction, newest first.
func (x *txn) rollback() {
	for i := len(x.undo) - 1; i >= 0; i-- {
		x.undo[i]()
	}
	x.undo, x.events, x.touched = nil, nil, nil
}

// create adds a node at p (final path, parent existing) with the given
// ephemeralOwner and updates the parent.
func (x *txn) create(p string, data []byte, acl []jute.ACL, owner int64) *node {
	parent, _ := parentOf(p)
	pn := x.t.nodes[parent]
	old := pn.stat
	n := &node{
		data:     data,
		acl:      acl,
		children: map[string]struct{}{},
		stat: jute.Stat{
			Czxid: x.zxid, Mzxid: x.zxid, Pzxid: x.zxid,
			Ctime: x.now, Mtime: x.now,
			EphemeralOwner: owner,
			DataLength:     int32(len(data)),
		},
	}
	oldSeq := pn.seq
	_, indexed := x.t.ephemerals[owner]
	x.touch(parent, true)
	x.touch(p, false)
	x.t.addNode(p, n)
	pn.seq++
	pn.stat.Cversion++
	pn.stat.NumChildren++
	pn.stat.Pzxid = x.zxid
	x.undo = append(x.undo, func() {
		x.t.removeNode(p)
		if !indexed {
			delete(x.t.ephemerals, owner) // as if never created
		}
		pn.stat, pn.seq = old, oldSeq
	})
	x.events = append(x.events, event{jute.EventNodeCreated, p}, event{jute.EventNodeChildrenChanged, parent})
	return n
}

// remove deletes the childless node at p and updates the parent.
func (x *txn) remove(p string) {
	parent, _ := parentOf(p)
	pn := x.t.nodes[parent]
	n := x.t.nodes[p]
	old := pn.stat
	x.touch(p, false)
	x.touch(parent, true)
	x.t.removeNode(p)
	pn.stat.Cversion++
	pn.stat.NumChildren--
	pn.stat.Pzxid = x.zxid
	x.undo = append(x.undo, func() {
		x.t.addNode(p, n)
		pn.stat = old
	})
	x.events = append(x.events, event{jute.EventNodeDeleted, p}, event{jute.EventNodeChildrenChanged, parent})
}

// setData replaces the data of the node at p.
func (x *txn) setData(n *node, p string, data []byte) {
	oldData, oldStat := n.data, n.stat
	x.touch(p, false)
	n.data = data
	n.stat.Version++
	n.stat.Mzxid = x.zxid
	n.stat.Mtime = x.now
	n.stat.DataLength = int32(len(data))
	x.undo = append(x.undo, func() { n.data, n.stat = oldData, oldStat })
	x.events = append(x.events, event{jute.EventNodeDataChanged, p})
}

// setACL replaces the ACL of n, the node at p.
func (x *txn) setACL(n *node, p string, acl []jute.ACL) {
	oldACL, oldStat := n.acl, n.stat
	x.touch(p, false)
	n.acl = acl
	n.stat.Aversion++
	x.undo = append(x.undo, func() { n.acl, n.stat = oldACL, oldStat })
}
