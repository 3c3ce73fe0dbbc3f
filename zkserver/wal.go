package zkserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

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
