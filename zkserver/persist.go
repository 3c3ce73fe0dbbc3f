package zkserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// On-disk format, version 1. A DataDir holds snapshots (snap.<zxid>) and
// transaction logs (log.<zxid>), zxid in 16 hex digits: the snapshot
// holds the state at that zxid, the log the transactions after it. Both
// are sequences of records: a 4-byte big-endian payload length, the
// payload's CRC-32 (IEEE), then the payload, whose first byte is the
// format version.
const (
	formatVersion = 1

	recTxn      = 1 // a transaction: zxid, closed session, node changes
	recSession  = 2 // createSession: zxid, id, timeout, password
	recSnapHead = 3 // snapshot header: zxid, then sessions, then nodes
	recSnapNode = 4 // one node of a snapshot
	recSnapSess = 5 // one session of a snapshot
)

// errTorn reports a record cut short or corrupted, as a crash mid-write
// leaves the end of a log.
var errTorn = errors.New("torn record")

// frameRecord appends payload to b as a length-prefixed, checksummed
// record.
func frameRecord(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
	return append(b, payload...)
}

// readRecord reads one record's payload; io.EOF at a clean end, errTorn
// for a partial or corrupted record.
func readRecord(r *bufio.Reader) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, errTorn
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 || n > 1<<30 {
		return nil, errTorn
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, errTorn
	}
	if crc32.ChecksumIEEE(p) != binary.BigEndian.Uint32(hdr[4:]) || p[0] != formatVersion {
		return nil, errTorn
	}
	return p, nil
}

// encodeNode writes a node's own state (not its children).
func encodeNode(e *jute.Encoder, p string, n *node) {
	e.String(p)
	e.Buffer(n.data)
	jute.EncodeACLs(e, n.acl)
	n.stat.Encode(e)
	e.Int32(n.seq)
}

func decodeNode(d *jute.Decoder) (string, *node) {
	p := d.String()
	n := &node{data: d.Buffer()}
	n.acl = jute.DecodeACLs(d)
	n.stat.Decode(d)
	n.seq = d.Int32()
	return p, n
}

// Kinds of node change in a transaction record.
const (
	changeDeleted  = 0 // path
	changeNode     = 1 // the whole node (see encodeNode)
	changeStatOnly = 2 // path, stat, sequence counter
)

// txnRecord encodes a committed transaction as the final state of every
// node it touched, in the order it first touched them.
func (s *Server) txnRecord(x *txn) []byte {
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recTxn})
	e.Int64(x.zxid)
	e.Int64(x.closed)
	e.Int32(int32(len(x.touched)))
	for _, t := range x.touched {
		n := s.tree.nodes[t.path]
		switch {
		case n == nil:
			e.Int32(changeDeleted)
			e.String(t.path)
		case t.statOnly:
			e.Int32(changeStatOnly)
			e.String(t.path)
			n.stat.Encode(e)
			e.Int32(n.seq)
		default:
			e.Int32(changeNode)
			encodeNode(e, t.path, n)
		}
	}
	return e.Bytes()
}

func sessionRecord(zxid int64, sess *session) []byte {
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recSession})
	e.Int64(zxid)
	e.Int64(sess.id)
	e.Int64(int64(sess.timeout))
	e.Buffer(sess.passwd)
	return e.Bytes()
}

// put sets the node at p (whose parent exists), keeping the children of
// a node already there.
func (t *tree) put(p string, n *node) {
	old := t.nodes[p]
	if old == nil {
		n.children = map[string]struct{}{}
		if p == "/" {
			t.nodes[p] = n
			return
		}
		t.addNode(p, n)
		return
	}
	n.children = old.children
	if o := old.ephemeralSession(); o != 0 {
		delete(t.ephemerals[o], p)
		if len(t.ephemerals[o]) == 0 {
			delete(t.ephemerals, o)
		}
	}
	t.nodes[p] = n
	if o := n.ephemeralSession(); o != 0 {
		if t.ephemerals[o] == nil {
			t.ephemerals[o] = map[string]struct{}{}
		}
		t.ephemerals[o][p] = struct{}{}
	}
}

// replay applies one log record to the state. Records at or before the
// state's zxid are skipped.
func (s *Server) replay(p []byte) error {
	d := jute.NewDecoder(p[2:])
	zxid := d.Int64()
	if d.Err() != nil {
		return d.Err()
	}
	if zxid <= s.zxid {
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
			if err := s.replayChange(d); err != nil {
				return err
			}
		}
		if closed != 0 {
			delete(s.sessions, closed)
		}
	case recSession:
		sess := &session{id: d.Int64(), timeout: time.Duration(d.Int64())}
		sess.passwd = d.Buffer()
		s.sessions[sess.id] = sess
	default:
		return fmt.Errorf("unknown record type %d", p[1])
	}
	if d.Err() != nil {
		return d.Err()
	}
	s.zxid = zxid
	return nil
}

// replayChange applies one node change of a transaction record.
func (s *Server) replayChange(d *jute.Decoder) error {
	switch kind := d.Int32(); kind {
	case changeDeleted:
		if p := d.String(); d.Err() == nil && s.tree.nodes[p] != nil {
			s.tree.removeNode(p)
		}
	case changeNode:
		p, n := decodeNode(d)
		if d.Err() == nil {
			if p != "/" && s.tree.nodes[parentDir(p)] == nil {
				return fmt.Errorf("%s has no parent", p)
			}
			s.tree.put(p, n)
		}
	case changeStatOnly:
		p := d.String()
		var st jute.Stat
		st.Decode(d)
		seq := d.Int32()
		n := s.tree.nodes[p]
		if d.Err() == nil {
			if n == nil {
				return fmt.Errorf("stat of missing node %s", p)
			}
			n.stat, n.seq = st, seq
		}
	default:
		return fmt.Errorf("unknown change kind %d", kind)
	}
	return d.Err()
}

// snapshot encodes the whole state: zxid, sessions, nodes (parents
// first).
func (s *Server) snapshot() []byte {
	var out []byte
	e := &jute.Encoder{}
	e.Raw([]byte{formatVersion, recSnapHead})
	e.Int64(s.zxid)
	out = frameRecord(out, e.Bytes())
	for _, id := range slices.Sorted(maps.Keys(s.sessions)) {
		sess := s.sessions[id]
		e := &jute.Encoder{}
		e.Raw([]byte{formatVersion, recSnapSess})
		e.Int64(sess.id)
		e.Int64(int64(sess.timeout))
		e.Buffer(sess.passwd)
		out = frameRecord(out, e.Bytes())
	}
	for _, p := range slices.Sorted(maps.Keys(s.tree.nodes)) {
		e := &jute.Encoder{}
		e.Raw([]byte{formatVersion, recSnapNode})
		encodeNode(e, p, s.tree.nodes[p])
		out = frameRecord(out, e.Bytes())
	}
	return out
}

// loadSnapshot replaces the state with the snapshot in file name.
func (s *Server) loadSnapshot(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	t := &tree{nodes: map[string]*node{}, ephemerals: map[int64]map[string]struct{}{}}
	sessions := map[int64]*session{}
	var zxid int64
	for i := 0; ; i++ {
		p, err := readRecord(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", name, err)
		}
		d := jute.NewDecoder(p[2:])
		switch {
		case i == 0 && p[1] == recSnapHead:
			zxid = d.Int64()
		case i > 0 && p[1] == recSnapSess:
			sess := &session{id: d.Int64(), timeout: time.Duration(d.Int64())}
			sess.passwd = d.Buffer()
			sessions[sess.id] = sess
		case i > 0 && p[1] == recSnapNode:
			path, n := decodeNode(d)
			if path != "/" && t.nodes[parentDir(path)] == nil {
				return fmt.Errorf("snapshot %s: %s has no parent", name, path)
			}
			t.put(path, n)
		default:
			return fmt.Errorf("snapshot %s: unexpected record type %d", name, p[1])
		}
		if d.Err() != nil {
			return fmt.Errorf("snapshot %s: %w", name, d.Err())
		}
	}
	if t.nodes["/"] == nil {
		return fmt.Errorf("snapshot %s: no root", name)
	}
	s.tree, s.sessions, s.zxid = t, sessions, zxid
	return nil
}

func parentDir(p string) string {
	parent, _ := parentOf(p)
	return parent
}

// replayLog applies the records of a log file, stopping at a torn
// record.
func (s *Server) replayLog(name string) error {
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
		if err := s.replay(p); err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		}
	}
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
	if len(snaps) > 0 {
		if err := s.loadSnapshot(snaps[len(snaps)-1]); err != nil {
			return err
		}
	}
	for _, name := range logs {
		if err := s.replayLog(name); err != nil {
			return err
		}
	}
	var maxID int64
	for id := range s.sessions {
		maxID = max(maxID, id)
	}
	if s.newSessionID() <= maxID {
		s.nextSession = maxID
	}
	return nil
}

// wal is the transaction log of a DataDir. Transactions are appended under
// the server's lock and written by one goroutine, which syncs everything
// appended while the previous sync ran at once (group commit). Replies
// wait until their transaction is durable (see conn.writeLoop).
type wal struct {
	dir string

	mu       sync.Mutex
	cond     *sync.Cond    // signals buf or closing changes
	f        *os.File      // current log file
	buf      []byte        // appended, not yet written
	appended uint64        // records appended so far
	durable  uint64        // records synced so far
	synced   chan struct{} // closed and replaced at each sync
	err      error         // the first write or sync error
	closing  bool
	done     chan struct{} // closed when the writer has exited
	since    int           // transactions since the last snapshot
}

// openWAL writes a snapshot of the server's state, starts a new log after
// it and removes older files. Called with s.mu held.
func (s *Server) openWAL(dir string) (*wal, error) {
	w := &wal{dir: dir, synced: make(chan struct{}), done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	if err := w.rotate(s.zxid, s.snapshot()); err != nil {
		return nil, err
	}
	go w.writeLoop()
	return w, nil
}

// rotate writes snap as the snapshot at zxid, opens a new log after it
// and removes older files. The log must be idle (nothing buffered).
func (w *wal) rotate(zxid int64, snap []byte) error {
	name := filepath.Join(w.dir, fmt.Sprintf("snap.%016x", zxid))
	if err := writeFileSync(name, snap); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("log.%016x", zxid)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	w.mu.Lock()
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	w.since = 0
	w.mu.Unlock()
	snaps, logs, err := dataFiles(w.dir)
	if err != nil {
		return err
	}
	keep := fmt.Sprintf("%016x", zxid)
	for _, old := range append(snaps, logs...) {
		if name := filepath.Base(old); name[strings.IndexByte(name, '.')+1:] < keep {
			os.Remove(old) // older state: not needed any more
		}
	}
	return nil
}

// writeFileSync writes a file atomically: a synced temporary file renamed
// into place.
func writeFileSync(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// append queues a record and returns how many transactions have been
// appended since the last snapshot.
func (w *wal) append(payload []byte) int {
	w.mu.Lock()
	w.buf = frameRecord(w.buf, payload)
	w.appended++
	w.since++
	since := w.since
	w.mu.Unlock()
	w.cond.Broadcast()
	return since
}

// state returns the records synced so far, a channel closed at the next
// sync, and the error that stopped the log, if any.
func (w *wal) state() (uint64, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable, w.synced, w.err
}

// position returns the records appended so far.
func (w *wal) position() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appended
}

func (w *wal) writeLoop() {
	defer close(w.done)
	var spare []byte
	for {
		w.mu.Lock()
		for len(w.buf) == 0 && !w.closing {
			w.cond.Wait()
		}
		if len(w.buf) == 0 {
			w.mu.Unlock()
			return
		}
		buf, target, f := w.buf, w.appended, w.f
		w.buf = spare[:0]
		w.mu.Unlock()

		err := w.err
		if err == nil {
			if _, err = f.Write(buf); err == nil {
				err = f.Sync()
			}
		}
		spare = buf

		w.mu.Lock()
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("zkserver: transaction log: %w", err)
		}
		if w.err == nil {
			w.durable = target
		}
		close(w.synced)
		w.synced = make(chan struct{})
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// flush waits until everything appended is durable.
func (w *wal) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.durable < w.appended && w.err == nil {
		w.cond.Wait()
	}
	return w.err
}

// close flushes the log and closes its file.
func (w *wal) close() error {
	err := w.flush()
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.cond.Broadcast()
	<-w.done
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fail stops the log: nothing more becomes durable, and connections
// waiting for a sync close.
func (w *wal) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	close(w.synced)
	w.synced = make(chan struct{})
	w.cond.Broadcast()
	w.mu.Unlock()
}
