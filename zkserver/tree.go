package zkserver

import (
	"maps"
	"slices"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Special ephemeralOwner values of container and TTL nodes, as ZooKeeper
// encodes them.
const (
	containerOwner = int64(-1 << 63)           // 0x8000000000000000
	ttlOwnerMask   = int64(-1 << 56)           // 0xff00000000000000
	maxTTL         = int64(0x000000ffffffffff) // the TTL value bits
)

// node is one znode.
type node struct {
	seq      int32 // child creations so far: the next sequential suffix
	data     []byte
	acl      []jute.ACL
	stat     jute.Stat
	children map[string]struct{}
}

func (n *node) isContainer() bool { return n.stat.EphemeralOwner == containerOwner }

// ttl returns the node's TTL in milliseconds, or 0 if it is no TTL node.
func (n *node) ttl() int64 {
	o := n.stat.EphemeralOwner
	if o != containerOwner && o&ttlOwnerMask == ttlOwnerMask {
		return o &^ ttlOwnerMask
	}
	return 0
}

// ephemeralSession returns the owning session of an ordinary ephemeral
// node, or 0.
func (n *node) ephemeralSession() int64 {
	o := n.stat.EphemeralOwner
	if o == 0 || o == containerOwner || o&ttlOwnerMask == ttlOwnerMask {
		return 0
	}
	return o
}

func (n *node) sortedChildren() []string {
	return slices.Sorted(maps.Keys(n.children))
}

// tree is the data tree: nodes by path, and each session's ephemerals.
type tree struct {
	nodes      map[string]*node
	ephemerals map[int64]map[string]struct{}
}

// lookup returns the node at p, or nil. As in ZooKeeper, whose tree
// holds the root under "" as well as "/", the empty path names the root.
func (t *tree) lookup(p string) *node {
	if p == "" {
		p = "/"
	}
	return t.nodes[p]
}

// isSpecial reports whether p is one of the nodes every server has,
// which ZooKeeper refuses to delete.
func isSpecial(p string) bool {
	switch p {
	case "/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config":
		return true
	}
	return false
}

// openACL is world:anyone with every permission.
var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

// readACL is world:anyone with read permission.
var readACL = []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}

// newTree returns a tree holding the nodes every ZooKeeper 3.8 server has:
// /, /zookeeper, /zookeeper/quota and /zookeeper/config.
func newTree() *tree {
	t := &tree{nodes: map[string]*node{}, ephemerals: map[int64]map[string]struct{}{}}
	t.nodes["/"] = &node{data: []byte{}, acl: openACL, children: map[string]struct{}{}}
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		acl := openACL
		if p == "/zookeeper/config" {
			acl = readACL
		}
		parent, name := parentOf(p)
		n := &node{data: []byte{}, acl: acl, children: map[string]struct{}{}}
		if p == "/zookeeper/config" {
			n.stat.Aversion = -1 // as ZooKeeper 3.8 reports them
		}
		t.nodes[p] = n
		pn := t.nodes[parent]
		pn.children[name] = struct{}{}
		pn.stat.NumChildren++
	}
	// As ZooKeeper 3.8 reports them: the system nodes' data is empty
	// (not null), and their parents' cversions count down.
	t.nodes["/"].stat.Cversion = -1
	t.nodes["/zookeeper"].stat.Cversion = -2
	return t
}

// clientStat returns the stat as clients see it: container and TTL nodes
// show no ephemeralOwner.
func (n *node) clientStat() *jute.Stat {
	st := n.stat
	if n.ephemeralSession() == 0 {
		st.EphemeralOwner = 0
	}
	return &st
}

// addNode links a new node under its existing parent; it changes no stat
// of the parent.
func (t *tree) addNode(p string, n *node) {
	parent, name := parentOf(p)
	t.nodes[parent].children[name] = struct{}{}
	t.nodes[p] = n
	if owner := n.ephemeralSession(); owner != 0 {
		if t.ephemerals[owner] == nil {
			t.ephemerals[owner] = map[string]struct{}{}
		}
		t.ephemerals[owner][p] = struct{}{}
	}
}

// removeNode unlinks a childless node from its parent and the ephemeral
// index. A session keeps its (maybe empty) entry in the index until it
// closes, as in ZooKeeper, whose dump lists it.
func (t *tree) removeNode(p string) {
	n := t.nodes[p]
	parent, name := parentOf(p)
	delete(t.nodes[parent].children, name)
	delete(t.nodes, p)
	if owner := n.ephemeralSession(); owner != 0 {
		delete(t.ephemerals[owner], p)
	}
}

// sessionEphemerals returns the paths of the session's ephemeral nodes
// under prefix, sorted.
func (t *tree) sessionEphemerals(id int64, prefix string) []string {
	var out []string
	for p := range t.ephemerals[id] {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// countDescendants returns the number of nodes below p.
func (t *tree) countDescendants(p string) int {
	n := t.nodes[p]
	total := 0
	for name := range n.children {
		total += 1 + t.countDescendants(join(p, name))
	}
	return total
}

// countEphemerals returns the number of ordinary ephemeral nodes.
func (t *tree) countEphemerals() int {
	total := 0
	for _, set := range t.ephemerals {
		total += len(set)
	}
	return total
}

// dataSize returns the total bytes of data and paths, like mntr's
// zk_approximate_data_size.
func (t *tree) dataSize() int64 {
	var total int64
	for p, n := range t.nodes {
		total += int64(len(p) + len(n.data))
	}
	return total
}
