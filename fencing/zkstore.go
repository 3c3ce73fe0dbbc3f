package fencing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ZooKeeperStore is a [Store] kept in ZooKeeper, so that the [Guard]s of
// several replicas of a service (behind a load balancer, say) share the
// highest tokens: a token lower than one any of them admitted is refused
// by all. The highest token of each resource is the data (in decimal) of a
// node in a directory, named after the resource ([ZooKeeperStore.Node]).
//
// Every decision is made by a conditional write, so it holds whichever
// ZooKeeper server each replica reads from: a raised token is a setData on
// the version of the node the replica knows, an equal one a multi that
// checks that version, and either is refused by the server (and the node
// read again) if another replica has written the node since. Costs: each
// replica caches the highest token and version it knows per resource, so
// an admission costs one conditional write (a quorum round trip, no read)
// while no other replica raised the token; one read more when one did, or
// the first time a replica sees the resource; a token lower than the
// cached highest is refused with no request at all, and the highest
// Advance then returns (a [Guard]'s [HighestHeader]) is the cached one:
// higher than the refused token, but maybe lower than one another replica
// has since admitted. The store keeps a
// node in ZooKeeper and an entry in memory per resource ever fenced, and
// deletes none: deleting a node forgets its tokens, which lets a stale
// holder in, so delete one only when no Guard uses it.
//
// A ZooKeeperStore is safe for concurrent use. Its client's session may be
// any: the store writes no ephemeral node. When that session expires, the
// store's calls fail (a Guard answers 503); make a new store on a new
// session's client, which finds the same nodes and only starts with an
// empty cache.
type ZooKeeperStore struct {
	c   *zkclient.Client
	dir string
	acl []zkclient.ACL

	mu    sync.Mutex
	known map[string]nodeState // by node path
}

// nodeState is a resource's node as a replica last knew it.
type nodeState struct {
	token   int64
	version int32
}

// NewZooKeeperStore returns the store whose nodes are children of dir,
// which must exist; they are created with acl (nil:
// zkclient.WorldACL(zkclient.PermAll)). Use one dir for the Guards that
// fence the same resources; a *zkrecipes.Session's client is s.Client().
func NewZooKeeperStore(c *zkclient.Client, dir string, acl []zkclient.ACL) *ZooKeeperStore {
	if acl == nil {
		acl = zkclient.WorldACL(zkclient.PermAll)
	}
	return &ZooKeeperStore{c: c, dir: strings.TrimSuffix(dir, "/"), acl: acl, known: make(map[string]nodeState)}
}

// Node returns the path of resource's node: the store's directory and the
// resource's name, each byte other than an ASCII letter, digit, '-' or
// '_' written %XX (so "/accounts/7" is "%2Faccounts%2F7"), and the empty
// name written "%".
func (s *ZooKeeperStore) Node(resource string) string {
	var b strings.Builder
	b.WriteString(s.dir)
	b.WriteByte('/')
	if resource == "" {
		b.WriteByte('%')
	}
	for i := range len(resource) {
		switch c := resource[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Advance implements [Store]. A token that is not positive is refused
// with an error wrapping [ErrNoToken]. After an error wrapping
// zkclient.ErrConnectionLoss the token may or may not have been recorded.
func (s *ZooKeeperStore) Advance(ctx context.Context, resource string, token int64) (int64, error) {
	if err := checkToken(resource, token); err != nil {
		return 0, err
	}
	p := s.Node(resource)
	s.mu.Lock()
	k, ok := s.known[p]
	s.mu.Unlock()
	for {
		if !ok {
			var err error
			if k, err = s.read(ctx, p); errors.Is(err, zkclient.ErrNoNode) {
				_, err = s.c.Create(ctx, p, strconv.AppendInt(nil, token, 10), zkclient.Persistent, s.acl)
				switch {
				case errors.Is(err, zkclient.ErrNodeExists):
					continue // another replica's first token came first
				case errors.Is(err, zkclient.ErrNoNode):
					return 0, fmt.Errorf("fencing: store for %q: its directory %s does not exist: %w", resource, s.dir, err)
				case err != nil:
					return 0, fmt.Errorf("fencing: store for %q: create %s: %w", resource, p, err)
				}
				s.remember(p, nodeState{token, 0})
				return token, nil
			} else if err != nil {
				return 0, err
			}
			s.remember(p, k)
			ok = true
		}
		if token < k.token {
			return k.token, nil // the node holds k.token or more: tokens only grow
		}
		var err error
		var version int32
		if token == k.token {
			version = k.version
			_, err = s.c.Multi(ctx, s.c.CheckOp(p, k.version))
		} else {
			var st zkclient.Stat
			st, err = s.c.Set(ctx, p, strconv.AppendInt(nil, token, 10), k.version)
			version = st.Version
		}
		switch {
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode):
			ok = false // written since: read it again
			continue
		case err != nil:
			return 0, fmt.Errorf("fencing: store for %q: record token %d in %s: %w", resource, token, p, err)
		}
		s.remember(p, nodeState{token, version})
		return token, nil
	}
}

// read returns what p holds now.
func (s *ZooKeeperStore) read(ctx context.Context, p string) (nodeState, error) {
	data, st, err := s.c.Get(ctx, p)
	if err != nil {
		return nodeState{}, fmt.Errorf("fencing: store: read %s: %w", p, err)
	}
	token, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || token <= 0 {
		return nodeState{}, fmt.Errorf("fencing: store: %s holds %q, not a token", p, data)
	}
	return nodeState{token, st.Version}, nil
}

// remember records k as what p holds, unless a later version is known.
func (s *ZooKeeperStore) remember(p string, k nodeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.known[p]; !ok || k.version > have.version {
		s.known[p] = k
	}
}
