package zkserver

import (
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// read answers a request that changes nothing in the tree (it may set
// watches) and returns its error code and reply body.
func (s *Server) read(c *conn, r *jute.Request) (int32, []byte) {
	e := &jute.Encoder{}
	switch r.Op {
	case jute.OpExists:
		// ZooKeeper checks only for NUL here; any other path is looked up
		// (and watched) as it is.
		if containsNUL(r.Path) {
			return jute.ErrBadArguments, nil
		}
		n := s.tree.lookup(r.Path)
		if r.Watch {
			s.watches.add(true, r.Path, c, modeStandard)
		}
		if n == nil {
			return jute.ErrNoNode, nil
		}
		n.clientStat().Encode(e)
	case jute.OpGetData, jute.OpGetChildren, jute.OpGetChildren2:
		return s.readNode(c, r)
	case jute.OpGetACL:
		n, code := s.permitted(c, r.Path, jute.PermRead|jute.PermAdmin)
		if code != 0 {
			return code, nil
		}
		acl := n.acl
		if !allowed(n.acl, c.auth, jute.PermAdmin) {
			acl = redactDigests(acl)
		}
		jute.EncodeACLs(e, acl)
		n.clientStat().Encode(e)
	case jute.OpSync:
		e.String(r.Path)
	case jute.OpGetEphemerals:
		prefix := r.Path
		if prefix == "" {
			prefix = "/"
		}
		e.Strings(orEmpty(s.tree.sessionEphemerals(c.sess.id, prefix)))
	case jute.OpGetAllChildrenNumber:
		if _, code := s.permitted(c, r.Path, jute.PermRead); code != 0 {
			return code, nil
		}
		p := r.Path
		if p == "" {
			p = "/"
		}
		e.Int32(int32(s.tree.countDescendants(p)))
	case jute.OpWhoAmI:
		e.Int32(int32(len(c.auth)))
		for _, id := range javaSetOrder(c.auth) {
			e.String(id.Scheme)
			user := id.ID
			if id.Scheme == "digest" {
				user, _, _ = strings.Cut(user, ":")
			}
			e.String(user)
		}
	case jute.OpCheckWatches, jute.OpRemoveWatches:
		if !s.removeWatches(c, r.Path, r.Mode, r.Op == jute.OpRemoveWatches) {
			return jute.ErrNoWatcher, nil
		}
	case jute.OpAddWatch:
		if code := s.addWatch(c, r); code != 0 {
			return code, nil
		}
		e.Int32(0)
	case jute.OpMultiRead:
		return 0, s.multiRead(c, r)
	default:
		return jute.ErrUnimplemented, nil
	}
	return 0, e.Bytes()
}

// readNode answers getData, getChildren and getChildren2. As in
// ZooKeeper, the path is not validated: it names a node or not.
func (s *Server) readNode(c *conn, r *jute.Request) (int32, []byte) {
	n, code := s.permitted(c, r.Path, jute.PermRead)
	if code != 0 {
		return code, nil
	}
	e := &jute.Encoder{}
	if r.Op == jute.OpGetData {
		if r.Watch {
			s.watches.add(true, r.Path, c, modeStandard)
		}
		e.Buffer(n.data) // null stays null, as in ZooKeeper
		n.clientStat().Encode(e)
		return 0, e.Bytes()
	}
	if r.Watch {
		s.watches.add(false, r.Path, c, modeStandard)
	}
	e.Strings(orEmpty(n.sortedChildren()))
	if r.Op == jute.OpGetChildren2 {
		n.clientStat().Encode(e)
	}
	return 0, e.Bytes()
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// redactDigests hides the password hashes of digest ACL entries from a
// reader without ADMIN permission, as ZooKeeper does.
func redactDigests(acl []jute.ACL) []jute.ACL {
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		if a.ID.Scheme == "digest" {
			user, _, _ := strings.Cut(a.ID.ID, ":")
			a.ID.ID = user + ":x"
		}
		out[i] = a
	}
	return out
}
