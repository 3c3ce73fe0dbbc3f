package zkserver

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// snapshotHead encodes the first records of a snapshot: its zxid and the
// sessions. Called with s.mu held.
func (s *Server) snapshotHead() []byte {
	var out []byte
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recSnapHead})
	e.Int64(s.zxid)
	out = frameRecord(out, e.Bytes())
	for _, id := range slices.Sorted(maps.Keys(s.sessions)) {
		sess := s.sessions[id]
		e := &jute.Encoder{}
		e.Raw([]byte{formatVersion, recSnapSess})
		encodeSession(e, sess)
		out = frameRecord(out, e.Bytes())
	}
	return out
}

// appendSnapNodes appends the snapshot records of the nodes at paths
// that still exist. Called with s.mu held.
func (s *Server) appendSnapNodes(out []byte, paths []string) []byte {
	for _, p := range paths {
		n := s.tree.nodes[p]
		if n == nil {
			continue // deleted since: a later log record says so
		}
		e := &jute.Encoder{}
		e.Raw([]byte{formatVersion, recSnapNode})
		encodeNode(e, p, n)
		out = frameRecord(out, e.Bytes())
	}
	return out
}

// snapshot encodes the whole state at once. Called with s.mu held.
func (s *Server) snapshot() []byte {
	return s.appendSnapNodes(s.snapshotHead(), slices.Sorted(maps.Keys(s.tree.nodes)))
}

// snapChunk is how many nodes, and snapChunkBytes how many bytes, a
// snapshot encodes per hold of the server's lock: writes wait at most
// that long. (Variables for tests.)
var (
	snapChunk      = 256
	snapChunkBytes = 1 << 20
)

// startSnapshot starts a snapshot at the current zxid, written while
// writes go on: the log switches to a new file now, the sessions and the
// list of paths are taken now (the only pause of writes, about 20ns a
// node), and a goroutine encodes the nodes a chunk at a time, writes the
// snapshot and removes the files it replaces. Called with s.mu held.
func (s *Server) startSnapshot() {
	s.snapshotting = true
	zxid := s.zxid
	opened := s.wal.rotate(zxid)
	head := s.snapshotHead()
	paths := make([]string, 0, len(s.tree.nodes))
	for p := range s.tree.nodes {
		paths = append(paths, p)
	}
	s.snapWG.Add(1)
	go func() {
		defer s.snapWG.Done()
		err := s.writeSnapshot(zxid, head, paths, opened)
		s.mu.Lock()
		s.snapshotting = false
		s.mu.Unlock()
		if err != nil {
			s.wal.fail(fmt.Errorf("zkserver: snapshot: %w", err))
		}
	}()
}

func (s *Server) writeSnapshot(zxid int64, head []byte, paths []string, opened <-chan struct{}) error {
	slices.Sort(paths)
	out := head
	for len(paths) > 0 {
		s.mu.Lock()
		start, n := len(out), 0
		for n < len(paths) && n < snapChunk && len(out)-start < snapChunkBytes {
			out = s.appendSnapNodes(out, paths[n:n+1])
			n++
		}
		s.mu.Unlock()
		paths = paths[n:]
		if s.snapHook != nil {
			s.snapHook()
		}
	}
	if err := s.wal.writeSnapshot(zxid, out); err != nil {
		return err
	}
	<-opened
	if _, _, err := s.wal.state(); err != nil {
		return nil // the log failed; it reported why
	}
	return s.wal.removeBefore(zxid)
}
