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
// transaction logs (log.<zxid>), zxid in 16 hex digits: the log holds the
// transactions after that zxid, the snapshot the sessions at that zxid
// and every node as it was at some moment after it. A snapshot is taken
// while writes go on, as ZooKeeper's are ("fuzzy"): each node is read
// whole, but not all at the same moment, so a loaded snapshot is brought
// up to date by replaying every transaction after its zxid. Replay is
// idempotent: each transaction record holds the final state of every
// node it touched. Both files are sequences of records: a 4-byte
// big-endian payload length, the payload's CRC-32 (IEEE), then the
// payload, whose first byte is the format version.
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

// state is a DataDir's content being loaded: nodes by path (their
// children are linked at the end), sessions and the last zxid.
type state struct {
	nodes    map[string]*node
	sessions map[int64]*session
	zxid     int64
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
		sess := &session{id: d.Int64(), timeout: time.Duration(d.Int64())}
		sess.passwd = d.Buffer()
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
		e.Int64(sess.id)
		e.Int64(int64(sess.timeout))
		e.Buffer(sess.passwd)
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
			sess := &session{id: d.Int64(), timeout: time.Duration(d.Int64())}
			sess.passwd = d.Buffer()
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

// wal is the transaction log of a DataDir. Transactions are appended under
// the server's lock and written by one goroutine, which syncs everything
// appended while the previous sync ran at once (group commit). Replies
// wait until their transaction is durable (see conn.writeLoop). A failed
// write or sync stops the log for good: nothing appended after it
// becomes durable, and the server stops (see Server.fail).
type wal struct {
	dir    string
	fsync  func(*os.File) error // (*os.File).Sync, or a test's fault
	onFail func(error)          // called once, when the log fails

	mu       sync.Mutex
	cond     *sync.Cond    // signals buf, rot or closing changes
	f        *os.File      // current log file
	buf      []byte        // appended for the current log, not yet written
	rot      *rotation     // a switch to a new log file, not made yet
	appended uint64        // records appended so far
	durable  uint64        // records synced so far
	synced   chan struct{} // closed and replaced at each sync
	err      error         // the first write or sync error
	closing  bool
	done     chan struct{} // closed when the writer has exited
	since    int           // transactions since the last snapshot
}

// rotation is a switch of the log to a new file, log.<zxid>: the records
// appended before it (before, up to record upTo) go to the old file.
type rotation struct {
	zxid   int64
	before []byte
	upTo   uint64
	opened chan struct{} // closed once the new file exists, or the log failed
}

// openWAL writes a snapshot of the server's state, starts a new log after
// it and removes older files. Called with s.mu held.
func (s *Server) openWAL(dir string) (*wal, error) {
	w := &wal{dir: dir, fsync: s.fsync, synced: make(chan struct{}), done: make(chan struct{})}
	if w.fsync == nil {
		w.fsync = (*os.File).Sync
	}
	w.onFail = s.fail
	w.cond = sync.NewCond(&w.mu)
	if err := w.writeSnapshot(s.zxid, s.snapshot()); err != nil {
		return nil, err
	}
	f, err := w.createLog(s.zxid)
	if err != nil {
		return nil, err
	}
	w.f = f
	if err := w.removeBefore(s.zxid); err != nil {
		f.Close()
		return nil, err
	}
	go w.writeLoop()
	return w, nil
}

// writeSnapshot writes snap as the snapshot at zxid, atomically and
// durably.
func (w *wal) writeSnapshot(zxid int64, snap []byte) error {
	name := filepath.Join(w.dir, fmt.Sprintf("snap.%016x", zxid))
	if err := w.writeFileSync(name, snap); err != nil {
		return err
	}
	return syncDir(w.dir)
}

// createLog creates the log file of the transactions after zxid.
func (w *wal) createLog(zxid int64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("log.%016x", zxid)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeBefore removes the snapshots and logs older than zxid's, which
// the snapshot at zxid and the log after it replace.
func (w *wal) removeBefore(zxid int64) error {
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

// rotate asks the writer to start a new log after zxid: the records
// appended so far go to the current file, later ones to log.<zxid>. The
// channel is closed once the new file exists (or the log failed).
// Called with the server's lock held, at the transaction zxid.
func (w *wal) rotate(zxid int64) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &rotation{zxid: zxid, before: w.buf, upTo: w.appended, opened: make(chan struct{})}
	w.buf, w.rot, w.since = nil, r, 0
	w.cond.Broadcast()
	return r.opened
}

// writeFileSync writes a file atomically: a synced temporary file renamed
// into place.
func (w *wal) writeFileSync(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = w.fsync(f)
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
// appended since the last snapshot started.
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
		for len(w.buf) == 0 && w.rot == nil && !w.closing {
			w.cond.Wait()
		}
		if r := w.rot; r != nil {
			w.rot = nil
			f, err := w.f, w.err
			w.mu.Unlock()
			var nf *os.File
			if err == nil && len(r.before) > 0 {
				if _, err = f.Write(r.before); err == nil {
					err = w.fsync(f)
				}
			}
			if err == nil {
				nf, err = w.createLog(r.zxid)
			}
			w.mu.Lock()
			if err == nil {
				w.f.Close()
				w.f = nf
			}
			w.finish(r.upTo, err)
			close(r.opened)
			continue
		}
		if len(w.buf) == 0 {
			w.mu.Unlock()
			return
		}
		buf, target, f, err := w.buf, w.appended, w.f, w.err
		w.buf = spare[:0]
		w.mu.Unlock()

		if err == nil {
			if _, err = f.Write(buf); err == nil {
				err = w.fsync(f)
			}
		}
		spare = buf

		w.mu.Lock()
		w.finish(target, err)
	}
}

// finish records the outcome of a write and sync up to record target
// and unlocks w.mu; a first error stops the log and the server.
func (w *wal) finish(target uint64, err error) {
	first := err != nil && w.err == nil
	if first {
		w.err = fmt.Errorf("zkserver: transaction log: %w", err)
	}
	if w.err == nil {
		w.durable = target
	}
	close(w.synced)
	w.synced = make(chan struct{})
	w.cond.Broadcast()
	err = w.err
	w.mu.Unlock()
	if first && w.onFail != nil {
		w.onFail(err)
	}
}

// waitDurable waits until the first n records are durable, or the log
// failed.
func (w *wal) waitDurable(n uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.durable < n && w.err == nil {
		w.cond.Wait()
	}
	return w.err
}

// close flushes the log and closes its file.
func (w *wal) close() error {
	err := w.waitDurable(w.position())
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

// fail stops the log: nothing more becomes durable, connections waiting
// for a sync close, and the server stops.
func (w *wal) fail(err error) {
	w.mu.Lock()
	first := w.err == nil
	if first {
		w.err = err
	}
	close(w.synced)
	w.synced = make(chan struct{})
	w.cond.Broadcast()
	w.mu.Unlock()
	if first && w.onFail != nil {
		w.onFail(err)
	}
}
