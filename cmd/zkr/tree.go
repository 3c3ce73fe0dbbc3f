package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/zkpath"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// What export, import, diff and ephemerals share: reading a subtree, a
// node's mode as its Stat tells it, and ACLs as text.

// Node modes as export, import and diff name them.
const (
	modePersistent = "persistent"
	modeContainer  = "container"
	modeTTL        = "ttl"
	modeEphemeral  = "ephemeral"
)

// maxTTL is the longest TTL ZooKeeper can keep, in milliseconds: it
// holds a TTL node's TTL in the low five bytes of the node's
// ephemeralOwner (org.apache.zookeeper.server.EphemeralType).
const maxTTL = int64(0x000000ffffffffff)

// nodeMode returns the mode a node's Stat tells, persistent or ephemeral,
// and the owning session of an ephemeral node. It cannot tell more:
// ZooKeeper keeps a container's or a TTL node's kind (and the TTL) in its
// ephemeralOwner, but reports 0 there to clients for both
// (DataNode.copyStat), so they read as persistent.
func nodeMode(owner int64) (mode string, session int64) {
	if owner == 0 {
		return modePersistent, 0
	}
	return modeEphemeral, owner
}

// treeNode is one node of a subtree read by readTree: what export writes,
// import creates and diff compares.
type treeNode struct {
	Path string     `json:"path"`
	Data []byte     `json:"data"` // base64; null for a node created with no data at all
	ACL  []aclEntry `json:"acl"`
	Mode string     `json:"mode"`             // persistent, container, ttl; ephemeral is never exported
	TTL  int64      `json:"ttl_ms,omitempty"` // of a ttl node, milliseconds

	session int64 // owner of an ephemeral node
}

// readOpts says what readTree reads of each node besides its Stat and
// children.
type readOpts struct {
	data, acl bool
}

// treeWorkers is how many requests readTree keeps in flight: enough to
// hide the round trips on a large tree, few enough not to crowd a server.
const treeWorkers = 16

// readTree reads the subtree at root, parents before children and
// siblings in name order, one listing (and with opts a read and an ACL
// read) per node, treeWorkers at a time. Nodes deleted while it reads are
// left out; root missing is an error wrapping zkclient.ErrNoNode. The
// read is not a point-in-time snapshot: ZooKeeper has none, so a tree
// changing meanwhile is read as it was at each node's read. Reading "/"
// leaves out /zookeeper, the server's own (quotas, configuration), and
// reports it in skipped.
func readTree(ctx context.Context, s *zkrecipes.Session, root string, opts readOpts) (nodes []*treeNode, skipped []string, err error) {
	type item struct {
		n    *treeNode
		kids []string
		err  error
	}
	read := func(p string) item {
		kids, st, err := s.Children(ctx, p)
		if err != nil {
			return item{err: err}
		}
		n := &treeNode{Path: p}
		n.Mode, n.session = nodeMode(st.EphemeralOwner)
		if opts.data {
			if n.Data, _, err = s.Get(ctx, p); err != nil {
				return item{err: err}
			}
		}
		if opts.acl {
			acl, _, err := s.GetACL(ctx, p)
			if err != nil {
				return item{err: err}
			}
			n.ACL = viewACL(acl)
		}
		return item{n: n, kids: kids}
	}

	level := []string{root}
	byPath := map[string]*treeNode{}
	for len(level) > 0 {
		items := make([]item, len(level))
		var wg sync.WaitGroup
		sem := make(chan struct{}, treeWorkers)
		for i, p := range level {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				items[i] = read(p)
			}()
		}
		wg.Wait()
		var next []string
		for i, it := range items {
			switch {
			case errors.Is(it.err, zkclient.ErrNoNode) && level[i] != root:
				continue // deleted meanwhile
			case it.err != nil:
				return nil, nil, it.err
			}
			byPath[it.n.Path] = it.n
			for _, k := range it.kids {
				c := zkpath.Join(it.n.Path, k)
				if c == "/zookeeper" {
					skipped = append(skipped, c)
					continue
				}
				next = append(next, c)
			}
		}
		level = next
	}
	// Depth first, in name order: parents before their children.
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, comparePaths)
	for _, p := range paths {
		nodes = append(nodes, byPath[p])
	}
	return nodes, skipped, nil
}

// comparePaths orders paths depth first, parents before children and
// siblings by name ("/a", "/a/b", "/a-b": the separator sorts first).
func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// relPath is p relative to root, as an absolute path: root itself is "/".
func relPath(root, p string) string {
	if root == "/" {
		return p
	}
	if p == root {
		return "/"
	}
	return strings.TrimPrefix(p, root)
}

// underPath is the relative path rel placed at root.
func underPath(root, rel string) string {
	switch {
	case rel == "/":
		return root
	case root == "/":
		return rel
	}
	return root + rel
}

// aclEntry is one ACL entry as zkr shows it: perms as the letters of
// zkCli.sh (c create, d delete, r read, w write, a admin).
type aclEntry struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

// String is the entry as "zkr acl set" takes it: scheme:id:perms.
func (e aclEntry) String() string { return e.Scheme + ":" + e.ID + ":" + e.Perms }

// permLetters are the permission letters, in zkCli.sh's order.
var permLetters = []struct {
	letter byte
	bit    int32
}{
	{'c', zkclient.PermCreate}, {'d', zkclient.PermDelete}, {'r', zkclient.PermRead},
	{'w', zkclient.PermWrite}, {'a', zkclient.PermAdmin},
}

func permString(perms int32) string {
	var b []byte
	for _, p := range permLetters {
		if perms&p.bit != 0 {
			b = append(b, p.letter)
		}
	}
	if rest := perms &^ zkclient.PermAll; rest != 0 {
		b = fmt.Appendf(b, "+%d", rest) // bits ZooKeeper does not define: kept visible
	}
	return string(b)
}

func parsePerms(s string) (int32, error) {
	var perms int32
	for i := 0; i < len(s); i++ {
		j := slices.IndexFunc(permLetters, func(p struct {
			letter byte
			bit    int32
		}) bool {
			return p.letter == s[i]
		})
		if j < 0 {
			return 0, fmt.Errorf("permissions %q: %q is not one of c (create), d (delete), r (read), w (write), a (admin)", s, s[i])
		}
		perms |= permLetters[j].bit
	}
	return perms, nil
}

// viewACL is acl as zkr shows it.
func viewACL(acl []zkclient.ACL) []aclEntry {
	out := make([]aclEntry, len(acl))
	for i, a := range acl {
		out[i] = aclEntry{Scheme: a.Scheme, ID: a.ID, Perms: permString(a.Perms)}
	}
	return out
}

// clientACL turns entries back into the client's ACL; what names the
// entries' place in an error.
func clientACL(what string, entries []aclEntry) ([]zkclient.ACL, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: empty ACL (ZooKeeper needs at least one entry)", what)
	}
	out := make([]zkclient.ACL, len(entries))
	for i, e := range entries {
		perms, err := parsePerms(e.Perms)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d (%s): %w", what, i+1, e, err)
		}
		if e.Scheme == "" {
			return nil, fmt.Errorf("%s: entry %d (%s): empty scheme", what, i+1, e)
		}
		out[i] = zkclient.ACL{Perms: perms, Scheme: e.Scheme, ID: e.ID}
	}
	return out, nil
}

// aclStart matches the start of an ACL entry in a comma-separated list:
// a scheme and a colon. A piece that does not start so continues the
// previous entry, whose id had a comma (an x509 subject "CN=a,O=b").
var aclStart = regexp.MustCompile(`^[A-Za-z0-9_.-]+:`)

// parseACL parses ACL entries "scheme:id:perms", each argument one or
// more of them separated by commas (zkCli.sh's form:
// "world:anyone:r,digest:alice:HASH=:cdrwa"). The id is what lies between
// the first and the last colon, so it may hold colons (digest user:hash,
// IPv6 addresses).
func parseACL(args []string) ([]aclEntry, error) {
	var pieces []string
	for _, arg := range args {
		for i, p := range strings.Split(arg, ",") {
			if i > 0 && !aclStart.MatchString(p) {
				pieces[len(pieces)-1] += "," + p
				continue
			}
			pieces = append(pieces, p)
		}
	}
	var out []aclEntry
	for _, p := range pieces {
		scheme, rest, ok := strings.Cut(p, ":")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 || scheme == "" {
			return nil, fmt.Errorf("ACL entry %q: expected scheme:id:perms (world:anyone:r, digest:user:HASH:cdrwa, ip:10.0.0.0/8:r, auth::cdrwa)", p)
		}
		e := aclEntry{Scheme: scheme, ID: rest[:i], Perms: rest[i+1:]}
		if _, err := parsePerms(e.Perms); err != nil {
			return nil, fmt.Errorf("ACL entry %q: %w", p, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, errors.New("no ACL entry given")
	}
	return out, nil
}

// sameACL reports whether a and b grant the same, in any order.
func sameACL(a, b []aclEntry) bool {
	key := func(es []aclEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			p, _ := parsePerms(e.Perms)
			out[i] = fmt.Sprintf("%s:%s:%d", e.Scheme, e.ID, p)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
