package zkserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// load restores the state of the DataDir: the newest snapshot, then the
// logs. Called with s.mu held.
func (s *Server) load(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	snaps, logs, err := dataFiles(dir)
	if err != nil {
		return err
	}
	if len(snaps) == 0 && len(logs) == 0 {
		return nil // a fresh DataDir keeps whatever the server holds
	}
	if s.zxid != 0 {
		return errors.New("the server changed before its first Start, and the DataDir holds data")
	}
	st := &state{nodes: s.tree.nodes, sessions: s.sessions}
	if len(snaps) > 0 {
		if st, err = loadSnapshot(snaps[len(snaps)-1]); err != nil {
			return err
		}
	}
	for _, name := range logs {
		if err := st.replayLog(name); err != nil {
			return err
		}
	}
	t, err := st.tree()
	if err != nil {
		return err
	}
	s.tree, s.sessions, s.zxid = t, st.sessions, st.zxid
	var maxID int64
	for id := range s.sessions {
		maxID = max(maxID, id)
	}
	if s.newSessionID() <= maxID {
		s.nextSession = maxID
	}
	return nil
}

// dataFiles returns the snapshot and log files of dir, oldest first.
func dataFiles(dir string) (snaps, logs []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "snap.") && len(name) == 21:
			snaps = append(snaps, filepath.Join(dir, name))
		case strings.HasPrefix(name, "log.") && len(name) == 20:
			logs = append(logs, filepath.Join(dir, name))
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	return snaps, logs, nil
}

// state is a DataDir's content being loaded: nodes by path (their
// children are linked at the end), sessions and the last zxid.
type state struct {
	nodes    map[string]*node
	sessions map[int64]*session
	zxid     int64
}

// loadSnapshot reads the snapshot in file name into a state.
func loadSnapshot(name string) (*state, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	st := &state{nodes: map[string]*node{}, sessions: map[int64]*session{}}
	for i := 0; ; i++ {
		p, err := readRecord(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", name, err)
		}
		d := jute.NewDecoder(p[2:])
		switch {
		case i == 0 && p[1] == recSnapHead:
			st.zxid = d.Int64()
		case i > 0 && p[1] == recSnapSess:
			sess := decodeSession(d)
			st.sessions[sess.id] = sess
		case i > 0 && p[1] == recSnapNode:
			path, n := decodeNode(d)
			st.nodes[path] = n
		default:
			return nil, fmt.Errorf("snapshot %s: unexpected record type %d", name, p[1])
		}
		if d.Err() != nil {
			return nil, fmt.Errorf("snapshot %s: %w", name, d.Err())
		}
	}
	if st.nodes["/"] == nil {
		return nil, fmt.Errorf("snapshot %s: no root", name)
	}
	return st, nil
}

// replayLog applies the records of a log file, stopping at a torn
// record.
func (st *state) replayLog(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		p, err := readRecord(r)
		if err == io.EOF || errors.Is(err, errTorn) {
			return nil // a torn tail: the crash came before its reply
		}
		if err := st.replay(p); err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		}
	}
}

// replay applies one log record. Records at or before the state's zxid
// are skipped: the snapshot already has them.
func (st *state) replay(p []byte) error {
	d := jute.NewDecoder(p[2:])
	zxid := d.Int64()
	if d.Err() != nil {
		return d.Err()
	}
	if zxid <= st.zxid {
		return nil
	}
	switch p[1] {
	case recTxn:
		closed := d.Int64()
		count := int(d.Int32())
		for range count {
			if d.Err() != nil {
				break
			}
			if err := st.replayChange(d); err != nil {
				return err
			}
		}
		if closed != 0 {
			delete(st.sessions, closed)
		}
	case recSession:
		sess := decodeSession(d)
		st.sessions[sess.id] = sess
	default:
		return fmt.Errorf("unknown record type %d", p[1])
	}
	if d.Err() != nil {
		return d.Err()
	}
	st.zxid = zxid
	return nil
}

// replayChange applies one node change of a transaction record. A
// parent's new stat for a node the fuzzy snapshot missed is skipped: the
// node was deleted later, and a later record says so.
func (st *state) replayChange(d *jute.Decoder) error {
	switch kind := d.Int32(); kind {
	case changeDeleted:
		if p := d.String(); d.Err() == nil {
			delete(st.nodes, p)
		}
	case changeNode:
		p, n := decodeNode(d)
		if d.Err() == nil {
			st.nodes[p] = n
		}
	case changeStatOnly:
		p := d.String()
		var stat jute.Stat
		stat.Decode(d)
		seq := d.Int32()
		if n := st.nodes[p]; d.Err() == nil && n != nil {
			n.stat, n.seq = stat, seq
		}
	default:
		return fmt.Errorf("unknown change kind %d", kind)
	}
	return d.Err()
}

// tree links the loaded nodes into a tree. Every node's parent must be
// there.
func (st *state) tree() (*tree, error) {
	t := &tree{nodes: st.nodes, ephemerals: map[int64]map[string]struct{}{}}
	if t.nodes["/"] == nil {
		return nil, errors.New("no root node")
	}
	for _, n := range t.nodes {
		n.children = map[string]struct{}{}
	}
	for p, n := range t.nodes {
		if p == "/" {
			continue
		}
		parent, name := parentOf(p)
		pn := t.nodes[parent]
		if pn == nil {
			return nil, fmt.Errorf("%s has no parent", p)
		}
		pn.children[name] = struct{}{}
		if owner := n.ephemeralSession(); owner != 0 {
			if t.ephemerals[owner] == nil {
				t.ephemerals[owner] = map[string]struct{}{}
			}
			t.ephemerals[owner][p] = struct{}{}
		}
	}
	return t, nil
}
