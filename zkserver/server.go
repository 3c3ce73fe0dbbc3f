package zkserver

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// ErrNoSession reports that the server does not know a session.
var ErrNoSession = errors.New("zkserver: no such session")

// ErrClosed reports a call on a closed server.
var ErrClosed = errors.New("zkserver: server closed")

// Server is an embedded ZooKeeper-compatible server. Its methods are safe
// for concurrent use.
type Server struct {
	opts   Options
	secret [32]byte

	mu          sync.Mutex
	tree        *tree
	watches     *watches
	sessions    map[int64]*session
	zxid        int64
	nextSession int64
	conns       map[*conn]struct{}
	perIP       map[string]int
	counters    counters
	stats       serverStats
	traceMask   int64
	started     time.Time

	wal        *wal // the transaction log, with a DataDir, once started
	ln         net.Listener
	secureLn   net.Listener
	addr       string // the plain client address, "" if none
	secureAddr string // the TLS client address, "" if none
	running    bool
	closing    bool // Close has begun
	closed     bool
	stop       chan struct{}
	wg         sync.WaitGroup

	// The failure that stopped the server (a transaction log or
	// snapshot that could not be written), and a channel closed then.
	err    error
	failed chan struct{}
	failWG sync.WaitGroup // the shutdown after a failure

	snapshotting bool                 // a snapshot is being written
	snapWG       sync.WaitGroup       // the snapshot being written
	fsync        func(*os.File) error // for tests: replaces (*os.File).Sync
	snapHook     func()               // for tests: runs between a snapshot's chunks
}

// NewServer returns a server that is not listening yet; see Start.
func NewServer(opts Options) *Server {
	s := &Server{
		opts:      opts.withDefaults(),
		tree:      newTree(),
		watches:   newWatches(),
		sessions:  map[int64]*session{},
		conns:     map[*conn]struct{}{},
		perIP:     map[string]int{},
		counters:  newCounters(),
		traceMask: defaultTraceMask,
		started:   time.Now(),
		failed:    make(chan struct{}),
	}
	rand.Read(s.secret[:])
	return s
}

// Run starts a server with default options on a free loopback port.
func Run() (*Server, error) {
	s := NewServer(Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// RunT starts a server like Run and closes it when the test ends. It fails
// the test if the server cannot start.
func RunT(tb testing.TB) *Server {
	tb.Helper()
	s, err := Run()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves
// clients until Close. With Options.TLS it also serves TLS clients on
// Options.SecureAddr; addr may then be "" for no plain port.
func (s *Server) Start(addr string) error {
	s.mu.Lock()
	secureAddr := s.secureAddr
	if secureAddr == "" {
		secureAddr = s.opts.SecureAddr
	}
	s.mu.Unlock()
	if addr == "" && s.opts.TLS == nil {
		return errors.New("zkserver: no address to listen on")
	}
	if s.opts.RequireSASL && len(s.opts.SASLUsers) == 0 {
		return errors.New("zkserver: Options.RequireSASL needs SASLUsers")
	}
	var ln, secureLn net.Listener
	closeAll := func() {
		for _, l := range []net.Listener{ln, secureLn} {
			if l != nil {
				l.Close()
			}
		}
	}
	var err error
	if addr != "" {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("zkserver: %w", err)
		}
	}
	if s.opts.TLS != nil {
		if secureLn, err = net.Listen("tcp", secureAddr); err != nil {
			closeAll()
			return fmt.Errorf("zkserver: secure port: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
		closeAll()
		return s.err
	case s.closed:
		closeAll()
		return ErrClosed
	case s.running:
		closeAll()
		return errors.New("zkserver: already running")
	}
	if s.opts.DataDir != "" && s.wal == nil {
		if err := s.openDataDir(); err != nil {
			closeAll()
			return err
		}
	}
	s.ln, s.secureLn, s.addr, s.secureAddr, s.running = ln, secureLn, "", "", true
	s.stop = make(chan struct{})
	now := time.Now()
	for _, sess := range s.sessions {
		sess.touch(now) // like ZooKeeper after loading its sessions
	}
	s.wg.Add(1)
	go s.tickLoop(s.stop)
	if ln != nil {
		s.addr = ln.Addr().String()
		s.wg.Add(1)
		go s.acceptLoop(ln)
	}
	if secureLn != nil {
		s.secureAddr = secureLn.Addr().String()
		s.wg.Add(1)
		go s.acceptLoop(tls.NewListener(secureLn, s.opts.TLS))
	}
	return nil
}

// Addr returns the address clients connect to ("127.0.0.1:port"), or ""
// if the server has no plain client port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// SecureAddr returns the address TLS clients connect to, or "" if the
// server has no secure port (Options.TLS).
func (s *Server) SecureAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.secureAddr
}

// Err returns the failure that stopped the server, or nil: with a
// DataDir, a transaction log or snapshot that could not be written (see
// Options.DataDir).
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Failed returns a channel that is closed when the server stops because
// of a failure (see Err).
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Close stops the server and closes every connection. It may be called
// more than once.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true // no snapshot starts from now on
	s.mu.Unlock()
	s.shutdown()
	s.failWG.Wait()
	s.snapWG.Wait()
	s.mu.Lock()
	s.closed = true
	w := s.wal
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
}

// Stop stops serving as a stopped or crashed server would: the listener
// and every connection close, and sessions do not expire while stopped.
// The tree, the zxid and the sessions stay; Start (on the same address,
// see Addr) serves them again, as does Restart.
func (s *Server) Stop() { s.shutdown() }

// Running reports whether the server is serving clients.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Restart stops listening, drops every connection and starts again on the
// same address, keeping the tree, the zxid and the sessions, whose
// timeouts start afresh (as when ZooKeeper reloads them). Watches, which
// belong to connections, are gone; clients restore them with SetWatches.
// Restart also starts a stopped server.
func (s *Server) Restart() error {
	addr := s.Addr()
	s.shutdown()
	if err := s.Err(); err != nil {
		return err
	}
	var err error
	for range 50 { // the old port may linger briefly
		if err = s.Start(addr); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// shutdown stops the listener, the tick loop and every connection.
func (s *Server) shutdown() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	for _, l := range []net.Listener{s.ln, s.secureLn} {
		if l != nil {
			l.Close()
		}
	}
	close(s.stop)
	conns := s.dropConnsLocked()
	s.mu.Unlock()
	s.wg.Wait()
	for _, c := range conns {
		<-c.done
	}
}

// DropConnections closes every client connection at once; sessions stay,
// so clients reconnect to them.
func (s *Server) DropConnections() {
	s.mu.Lock()
	s.dropConnsLocked()
	s.mu.Unlock()
}

func (s *Server) dropConnsLocked() []*conn {
	var out []*conn
	for c := range s.conns {
		c.closeNow()
		out = append(out, c)
	}
	return out
}

func (s *Server) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if !s.running || s.opts.MaxConnsPerIP > 0 && s.perIP[c.ip] >= s.opts.MaxConnsPerIP {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.perIP[c.ip]++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

// connGone forgets a connection whose reader has ended: its watches go,
// its session (if any) stays until it expires or the client comes back.
func (s *Server) connGone(c *conn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
			delete(s.perIP, c.ip)
		}
	}
	s.watches.removeConn(c)
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
	c.sess = nil
	s.mu.Unlock()
	// Flush what is queued (a last reply), but not forever to a client
	// that does not read.
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.closeAfterFlush()
	<-c.done
}

func (s *Server) tickLoop(stop chan struct{}) {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.TickTime)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			s.mu.Lock()
			s.expireSessions(now)
			if now.Sub(lastCheck) >= s.opts.ContainerCheckInterval {
				lastCheck = now
				s.removeEmptyContainers(now)
			}
			s.mu.Unlock()
		}
	}
}

// begin starts a transaction with the next zxid. Called with s.mu held.
func (s *Server) begin() *txn {
	s.zxid++
	return &txn{t: s.tree, zxid: s.zxid, now: time.Now().UnixMilli()}
}

// commit fires the watch events of a transaction, in order. Called with
// s.mu held.
func (s *Server) commit(x *txn) {
	if s.wal != nil {
		s.logRecord(s.txnRecord(x))
	}
	for _, ev := range x.events {
		switch ev.typ {
		case jute.EventNodeCreated, jute.EventNodeDataChanged:
			s.fire(s.watches.trigger(true, ev.typ, ev.path, nil), ev)
		case jute.EventNodeDeleted:
			hit := s.watches.trigger(true, ev.typ, ev.path, nil)
			s.fire(hit, ev)
			s.fire(s.watches.trigger(false, ev.typ, ev.path, hit), ev)
		case jute.EventNodeChildrenChanged:
			s.fire(s.watches.trigger(false, ev.typ, ev.path, nil), ev)
		}
	}
	x.events, x.undo = nil, nil
}

func (s *Server) fire(hit map[*conn]bool, ev event) {
	for c := range hit {
		s.notify(c, ev.typ, ev.path)
	}
}

// openDataDir loads the state of the DataDir and opens its log. Called
// with s.mu held.
func (s *Server) openDataDir() error {
	if err := s.load(s.opts.DataDir); err != nil {
		return fmt.Errorf("zkserver: load %s: %w", s.opts.DataDir, err)
	}
	w, err := s.openWAL(s.opts.DataDir)
	if err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	s.wal = w
	return nil
}

// logRecord appends a transaction to the log, if any, and starts a
// snapshot every SnapshotCount transactions (unless one is being
// written). Called with s.mu held.
func (s *Server) logRecord(payload []byte) {
	if s.wal == nil {
		return
	}
	if s.wal.append(payload) >= s.opts.SnapshotCount && !s.snapshotting && !s.closing {
		s.startSnapshot()
	}
}

// fail stops the server for good after err, a transaction log or
// snapshot that could not be written: from then on nothing is
// acknowledged (replies waiting for the failed sync are never sent), the
// listeners and connections close, Err returns err and Failed is closed.
// ZooKeeper exits in this case; a new Server on the DataDir recovers what
// was durable.
func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.failed)
	s.failWG.Add(1)
	go func() {
		defer s.failWG.Done()
		s.shutdown()
	}()
}
