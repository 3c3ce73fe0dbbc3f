package zkserver

import (
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// isWrite reports whether op is a transaction (it takes a zxid, even when
// it fails, as in ZooKeeper).
func isWrite(op int32) bool {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL,
		jute.OpDelete, jute.OpSetData, jute.OpSetACL, jute.OpCheck, jute.OpMulti,
		jute.OpReconfig:
		return true
	}
	return false
}

// writeTxn applies the write request r of c as one transaction, which
// commits even when the request fails (its changes undone): a failed
// write takes a zxid too, as in ZooKeeper. It returns the transaction's
// zxid and the request's error code and reply body. Called with s.mu held.
func (s *Server) writeTxn(c *conn, r *jute.Request) (int64, int32, []byte) {
	x := s.begin()
	code, body := s.write(x, c, r, false)
	if code != 0 {
		x.rollback()
	}
	s.commit(x)
	return x.zxid, code, body
}

// write applies a write request in x and returns its error code and reply
// body.
func (s *Server) write(x *txn, c *conn, r *jute.Request, inMulti bool) (int32, []byte) {
	e := &jute.Encoder{}
	switch r.Op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		p, n, code := s.create(x, c, r)
		if code != 0 {
			return code, nil
		}
		e.String(p)
		if r.Op != jute.OpCreate && !(inMulti && multiCreateType(r.Flags) == jute.OpCreate) {
			n.clientStat().Encode(e)
		}
	case jute.OpDelete:
		if code := s.delete(x, c, r); code != 0 {
			return code, nil
		}
	case jute.OpSetData:
		n, code := s.setData(x, c, r)
		if code != 0 {
			return code, nil
		}
		n.clientStat().Encode(e)
	case jute.OpSetACL:
		n, code := s.setACL(x, c, r)
		if code != 0 {
			return code, nil
		}
		n.clientStat().Encode(e)
	case jute.OpCheck:
		if code := s.check(c, r); code != 0 {
			return code, nil
		}
	case jute.OpMulti:
		return 0, s.multi(x, c, r)
	case jute.OpReconfig:
		return jute.ErrReconfigDisabled, nil
	}
	return 0, e.Bytes()
}

// create mode flags.
const (
	flagEphemeral  = 1
	flagSequential = 2
	flagContainer  = 4
	flagTTL        = 5
	flagTTLSeq     = 6
)

// create validates and applies a create request, returning the final
// path and node. The checks run in ZooKeeper's order.
func (s *Server) create(x *txn, c *conn, r *jute.Request) (string, *node, int32) {
	if r.Flags < 0 || r.Flags > flagTTLSeq {
		return "", nil, jute.ErrBadArguments
	}
	isTTL := r.Flags == flagTTL || r.Flags == flagTTLSeq
	if isTTL && !s.opts.TTLEnabled {
		return "", nil, jute.ErrUnimplemented
	}
	ttl := int64(-1)
	if r.Op == jute.OpCreateTTL {
		ttl = r.TTL
		if !isTTL {
			// With a TTL below 0, ZooKeeper 3.8.0 accepts this, fails
			// applying it and exits; refused here whatever the TTL.
			return "", nil, jute.ErrBadArguments
		}
	}
	if isTTL && (ttl <= 0 || ttl > maxTTL) || !isTTL && ttl >= 0 {
		return "", nil, jute.ErrBadArguments
	}
	sequential := r.Flags == 2 || r.Flags == 3 || r.Flags == flagTTLSeq
	// ZooKeeper's first check needs only a slash somewhere and no NUL;
	// the parent is then looked up, the whole path validated last.
	slash := strings.LastIndexByte(r.Path, '/')
	if slash < 0 || containsNUL(r.Path) {
		return "", nil, jute.ErrBadArguments
	}
	parent := r.Path[:slash]
	acl, code := s.fixACL(r.ACL, c.auth)
	if code != 0 {
		return "", nil, code
	}
	pn := s.tree.lookup(parent)
	if pn == nil {
		return "", nil, jute.ErrNoNode
	}
	if !allowed(pn.acl, c.auth, jute.PermCreate) {
		return "", nil, jute.ErrNoAuth
	}
	p := r.Path
	if sequential {
		p += fmt.Sprintf("%010d", pn.seq)
	}
	if !validPath(p) {
		return "", nil, jute.ErrBadArguments
	}
	if _, ok := s.tree.nodes[p]; ok {
		return "", nil, jute.ErrNodeExists
	}
	if pn.ephemeralSession() != 0 {
		return "", nil, jute.ErrNoChildrenForEphemerals
	}
	var owner int64
	switch r.Flags {
	case 1, 3:
		owner = c.sess.id
	case flagContainer:
		owner = containerOwner
	case flagTTL, flagTTLSeq:
		owner = ttlOwnerMask | ttl
	}
	if r.Op == jute.OpCreateContainer {
		owner = containerOwner // a container whatever the flags, as in ZooKeeper
	}
	return p, x.create(p, r.Data, acl, owner), 0
}

func containsNUL(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return true
		}
	}
	return false
}

// delete validates and applies a delete request, in ZooKeeper's order:
// a path with a slash, no NUL and not a system node; the parent; its
// DELETE permission; the node, its version, its children.
func (s *Server) delete(x *txn, c *conn, r *jute.Request) int32 {
	slash := strings.LastIndexByte(r.Path, '/')
	if slash < 0 || containsNUL(r.Path) || isSpecial(r.Path) {
		return jute.ErrBadArguments
	}
	pn := s.tree.lookup(r.Path[:slash])
	if pn == nil {
		return jute.ErrNoNode
	}
	if !allowed(pn.acl, c.auth, jute.PermDelete) {
		return jute.ErrNoAuth
	}
	n := s.tree.nodes[r.Path]
	if n == nil {
		return jute.ErrNoNode
	}
	if r.Version != -1 && r.Version != n.stat.Version {
		return jute.ErrBadVersion
	}
	if len(n.children) > 0 {
		return jute.ErrNotEmpty
	}
	x.remove(r.Path)
	return 0
}

// setData validates and applies a setData request.
func (s *Server) setData(x *txn, c *conn, r *jute.Request) (*node, int32) {
	if !validPath(r.Path) {
		return nil, jute.ErrBadArguments
	}
	n, code := s.permitted(c, r.Path, jute.PermWrite)
	if code != 0 {
		return nil, code
	}
	if r.Version != -1 && r.Version != n.stat.Version {
		return nil, jute.ErrBadVersion
	}
	x.setData(n, r.Path, r.Data)
	return n, 0
}

// setACL validates and applies a setACL request.
func (s *Server) setACL(x *txn, c *conn, r *jute.Request) (*node, int32) {
	if !validPath(r.Path) {
		return nil, jute.ErrBadArguments
	}
	acl, code := s.fixACL(r.ACL, c.auth)
	if code != 0 {
		return nil, code
	}
	n, code := s.permitted(c, r.Path, jute.PermAdmin)
	if code != 0 {
		return nil, code
	}
	if r.Version != -1 && r.Version != n.stat.Aversion {
		return nil, jute.ErrBadVersion
	}
	x.setACL(n, r.Path, acl)
	return n, 0
}

// check validates a version check.
func (s *Server) check(c *conn, r *jute.Request) int32 {
	if !validPath(r.Path) {
		return jute.ErrBadArguments
	}
	n, code := s.permitted(c, r.Path, jute.PermRead)
	if code != 0 {
		return code
	}
	if r.Version != -1 && r.Version != n.stat.Version {
		return jute.ErrBadVersion
	}
	return 0
}

// multiCreateType is the result type ZooKeeper gives a create in a multi:
// ordinary nodes get a create result (the path), containers and TTL nodes
// a create2 result (path and stat).
func multiCreateType(flags int32) int32 {
	if flags == flagContainer || flags == flagTTL || flags == flagTTLSeq {
		return jute.OpCreate2
	}
	return jute.OpCreate
}
