package zkserver

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// ExpireSession ends session id as if it had timed out: its ephemeral
// nodes are deleted in one transaction, watches fire, and its connection
// is closed; the client learns of the expiry when it reconnects. The
// error wraps ErrNoSession if the session does not exist.
func (s *Server) ExpireSession(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		return fmt.Errorf("expire session 0x%x: %w", id, ErrNoSession)
	}
	if _, c := s.closeSession(sess); c != nil {
		c.closeAfterFlush()
	}
	return nil
}

// Sessions returns the ids of the live sessions, sorted.
func (s *Server) Sessions() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.sessions))
}

// Zxid returns the last transaction id.
func (s *Server) Zxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zxid
}

// NodeError is the error of a direct tree helper: the ZooKeeper error code
// the same request from a client would have got.
type NodeError struct {
	Op   string
	Path string
	Code int32 // e.g. -101 NoNode, -110 NodeExists, -111 NotEmpty
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("zkserver: %s %s: ZooKeeper error %d", e.Op, e.Path, e.Code)
}

// admin is a pseudo connection for the direct helpers: world permissions
// only, no session.
func (s *Server) admin() *conn {
	return &conn{srv: s, auth: nil}
}

// apply runs one write request as a transaction, as if from a client,
// and, with a DataDir, returns once it is durable.
func (s *Server) apply(name string, r *jute.Request) ([]byte, error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	_, code, body := s.writeTxn(s.admin(), r)
	w := s.wal
	var pos uint64
	if w != nil {
		pos = w.position()
	}
	s.mu.Unlock()
	if w != nil {
		if err := w.waitDurable(pos); err != nil {
			return nil, err
		}
	}
	if code != 0 {
		return nil, &NodeError{Op: name, Path: r.Path, Code: code}
	}
	return body, nil
}

// Create creates a persistent node with an open ACL, firing watches as a
// client's create would. The parent must exist.
func (s *Server) Create(path string, data []byte) error {
	_, err := s.apply("create", &jute.Request{Op: jute.OpCreate, Path: path, Data: data, ACL: openACL})
	return err
}

// Set replaces a node's data regardless of its version.
func (s *Server) Set(path string, data []byte) error {
	_, err := s.apply("set", &jute.Request{Op: jute.OpSetData, Path: path, Data: data, Version: -1})
	return err
}

// Delete deletes a childless node regardless of its version.
func (s *Server) Delete(path string) error {
	_, err := s.apply("delete", &jute.Request{Op: jute.OpDelete, Path: path, Version: -1})
	return err
}

// Get returns a copy of a node's data.
func (s *Server) Get(path string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.tree.nodes[path]
	if n == nil {
		return nil, &NodeError{Op: "get", Path: path, Code: jute.ErrNoNode}
	}
	return slices.Clone(n.data), nil
}

// Exists reports whether a node exists.
func (s *Server) Exists(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.nodes[path] != nil
}

// Children returns the names of a node's children, sorted.
func (s *Server) Children(path string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.tree.nodes[path]
	if n == nil {
		return nil, &NodeError{Op: "children", Path: path, Code: jute.ErrNoNode}
	}
	return n.sortedChildren(), nil
}

// Stat is a node's metadata as ZooKeeper reports it.
type Stat = jute.Stat

// NodeStat returns a node's metadata as a client would see it.
func (s *Server) NodeStat(path string) (Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.tree.nodes[path]
	if n == nil {
		return Stat{}, &NodeError{Op: "stat", Path: path, Code: jute.ErrNoNode}
	}
	return *n.clientStat(), nil
}

// CheckContainers removes empty containers and expired TTL nodes now,
// instead of waiting for the periodic check.
func (s *Server) CheckContainers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeEmptyContainers(timeNow())
}
