package zkserver

import (
	"github.com/zkrecipes/zkrecipes/zkserver/internal/jute"
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
}

// rollback undoes every change of the transaction, newest first.
func (x *txn) rollback() {
	for i := len(x.undo) - 1; i >= 0; i-- {
		x.undo[i]()
	}
	x.undo, x.events = nil, nil
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
	x.t.addNode(p, n)
	pn.seq++
	pn.stat.Cversion++
	pn.stat.NumChildren++
	pn.stat.Pzxid = x.zxid
	x.undo = append(x.undo, func() {
		x.t.removeNode(p)
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
	n.data = data
	n.stat.Version++
	n.stat.Mzxid = x.zxid
	n.stat.Mtime = x.now
	n.stat.DataLength = int32(len(data))
	x.undo = append(x.undo, func() { n.data, n.stat = oldData, oldStat })
	x.events = append(x.events, event{jute.EventNodeDataChanged, p})
}

// setACL replaces the ACL of n.
func (x *txn) setACL(n *node, acl []jute.ACL) {
	oldACL, oldStat := n.acl, n.stat
	n.acl = acl
	n.stat.Aversion++
	x.undo = append(x.undo, func() { n.acl, n.stat = oldACL, oldStat })
}
