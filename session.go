package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Session is one ZooKeeper session and its life: connected, suspended
// (connection down, session possibly still alive on the server), and over
// (expired by the server, or closed). Every recipe value is bound to one
// Session; when the Session is over, everything obtained through it is void.
//
// Unlike the underlying client, a Session never continues on a new session
// after the server expired it: once Done is closed, every call returns an
// error that wraps ErrSessionExpired or ErrSessionClosed, and a new Session
// must be made.
//
// A Session is safe for concurrent use.
type Session struct {
	conn   *zk.Conn
	events <-chan zk.Event // the client's lossy channel: drained only to know when it is closed
	log    *slog.Logger
	acl    []zk.ACL
	strict bool

	refuse   atomic.Bool  // once over, the dialer opens no connection: no silent new session
	lastRead atomic.Int64 // unix nanoseconds of the last bytes read from a server
	stats    counters

	mu       sync.Mutex
	id       int64
	passwd   []byte
	timeout  time.Duration // negotiated
	up       chan struct{} // closed while connected with the session; replaced when the connection drops
	isUp     bool
	wasUp    bool // connected at least once: later connections are reconnections
	done     chan struct{}
	err      error
	holds    map[chan struct{}]struct{}
	void     bool // strict mode: the connection has been down long enough that holdings may be void
	strictT  *time.Timer
	finished chan struct{} // closed when the client's goroutines are gone
}

// SessionOption configures a Session.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	timeout time.Duration
	log     *slog.Logger
	auth    [][2]string
	acl     []zk.ACL
	strict  bool
}

// WithSessionTimeout asks the server for this session timeout (default 10s).
// The server clamps it into [2, 20] x its tickTime unless configured
// otherwise; Timeout reports the negotiated value.
func WithSessionTimeout(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.timeout = d }
}

// WithLogger sends the session's life events (connected, suspended,
// reconnected, expired) and the client's own messages (at debug level) to l.
// By default nothing is logged.
func WithLogger(l *slog.Logger) SessionOption {
	return func(c *sessionConfig) { c.log = l }
}

// WithDigestAuth authenticates the session with ZooKeeper's digest scheme.
// The credentials are sent again after every reconnection.
func WithDigestAuth(user, password string) SessionOption {
	return func(c *sessionConfig) { c.auth = append(c.auth, [2]string{user, password}) }
}

// WithACL sets the ACL of every node the recipes create, including the
// missing parents of a recipe path (default: world, all permissions). Use
// zk.DigestACL or zk.AuthACL with WithDigestAuth to restrict them; create
// shared ancestors beforehand if other clients must write under them.
func WithACL(acl []zk.ACL) SessionOption {
	return func(c *sessionConfig) { c.acl = acl }
}

// WithStrict makes holdings (locks, leadership) report loss as soon as the
// connection has been down long enough that the server could have expired
// the session: half the negotiated timeout after the last bytes read from
// the server. Without it, loss is reported only when the session is known to
// be over. In strict mode a holder whose Lost channel closed must assume it
// no longer holds, even if the session later turns out to have survived; it
// should release (Unlock, Resign) and acquire again.
func WithStrict() SessionOption {
	return func(c *sessionConfig) { c.strict = true }
}

// NewSession connects to one of servers ("host:port") and establishes a
// session. It returns when the session is established, or with an error
// when ctx ends first (a deadline on ctx is the connect timeout) or
// authentication fails.
func NewSession(ctx context.Context, servers []string, opts ...SessionOption) (*Session, error) {
	cfg := sessionConfig{timeout: 10 * time.Second, acl: zk.WorldACL(zk.PermAll)}
	for _, o := range opts {
		o(&cfg)
	}
	if len(servers) == 0 {
		return nil, errors.New("zkrecipes: no ZooKeeper servers given")
	}
	for _, a := range servers {
		if a == "" {
			return nil, fmt.Errorf("zkrecipes: empty server address in %q", servers)
		}
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("zkrecipes: session timeout %v is not positive", cfg.timeout)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		log:      cfg.log,
		acl:      cfg.acl,
		strict:   cfg.strict,
		up:       make(chan struct{}),
		done:     make(chan struct{}),
		holds:    make(map[chan struct{}]struct{}),
		finished: make(chan struct{}),
	}
	conn, events, err := zk.Connect(servers, cfg.timeout,
		zk.WithDialer(s.dial),
		zk.WithEventCallback(s.onEvent),
		zk.WithLogger(zkLogger{cfg.log}),
		zk.WithLogInfo(false),
	)
	if err != nil {
		return nil, fmt.Errorf("zkrecipes: connect %q: %w", servers, err)
	}
	s.conn, s.events = conn, events
	go s.reap()

	if err := s.awaitUp(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("zkrecipes: connect %q: %w", servers, err)
	}
	for _, a := range cfg.auth {
		if _, err := do(ctx, s, func(c *zk.Conn) (struct{}, error) {
			return struct{}{}, c.AddAuth("digest", []byte(a[0]+":"+a[1]))
		}); err != nil {
			s.Close()
			return nil, fmt.Errorf("zkrecipes: digest auth as %q: %w", a[0], err)
		}
	}
	s.log.Info("zookeeper session established", "session", fmt.Sprintf("0x%x", s.ID()), "timeout", s.Timeout())
	return s, nil
}

// ID returns the session id the server assigned.
func (s *Session) ID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Credentials returns the session id and password, with which a second
// connection can attach to this session. It is meant for tools and tests
// (zktest.ExpireSession); anyone holding them can end the session.
func (s *Session) Credentials() (id int64, password []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, append([]byte(nil), s.passwd...)
}

// Timeout returns the session timeout the server granted.
func (s *Session) Timeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeout
}

// Connected reports whether the session currently has a live connection.
func (s *Session) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isUp
}

// Server returns the address of the server the session is connected (or
// connecting) to.
func (s *Session) Server() string { return s.conn.Server() }

// Done returns a channel closed when the session is over: expired by the
// server or closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session lives, then why it ended: an error
// wrapping ErrSessionExpired or ErrSessionClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session: the server deletes its ephemeral nodes at once,
// so every lock, leadership and membership held through it is released. It
// waits (briefly) for the client's goroutines to stop. Close is idempotent;
// it returns nil.
func (s *Session) Close() error {
	s.end(ErrSessionClosed)
	select {
	case <-s.finished:
	case <-time.After(5 * time.Second):
		s.log.Warn("zookeeper client did not stop within 5s")
	}
	return nil
}

// end makes the session over with the reason err (kept if it was already over).
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.refuse.Store(true)
	s.err = fmt.Errorf("%w (session 0x%x)", err, s.id)
	close(s.done)
	s.voidHoldsLocked()
	if s.strictT != nil {
		s.strictT.Stop()
	}
	if errors.Is(err, ErrSessionExpired) {
		s.log.Error("zookeeper session expired", "session", fmt.Sprintf("0x%x", s.id))
	} else {
		s.log.Info("zookeeper session closed", "session", fmt.Sprintf("0x%x", s.id))
	}
}

// reap closes the client once the session is over and waits until its
// goroutines have stopped (its event channel is closed last).
func (s *Session) reap() {
	<-s.done
	s.conn.Close()
	for range s.events {
	}
	close(s.finished)
}

// onEvent is the client's event callback; it runs on the client's goroutine
// and must not block.
func (s *Session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		if ev.Type != zk.EventNotWatching {
			s.stats.watchEvents.Add(1)
		}
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		s.connected()
	case zk.StateDisconnected:
		s.disconnected()
	case zk.StateExpired:
		s.end(ErrSessionExpired)
	case zk.StateAuthFailed:
		s.log.Error("zookeeper authentication failed")
	}
}

func (s *Session) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.isUp {
		return
	}
	s.isUp = true
	close(s.up)
	if s.strictT != nil {
		s.strictT.Stop()
		s.strictT = nil
	}
	switch {
	case s.void:
		s.void = false
		s.log.Warn("zookeeper session reconnected after holdings were reported lost", "session", fmt.Sprintf("0x%x", s.id), "timeout", s.timeout)
	case s.wasUp:
		// The server may grant another timeout than before: log it.
		s.log.Info("zookeeper session reconnected", "session", fmt.Sprintf("0x%x", s.id), "timeout", s.timeout)
	}
	s.wasUp = true
}

func (s *Session) disconnected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || !s.isUp {
		return
	}
	s.isUp = false
	s.up = make(chan struct{})
	s.log.Warn("zookeeper connection lost; session suspended", "session", fmt.Sprintf("0x%x", s.id))
	if !s.strict {
		return
	}
	deadline := time.Unix(0, s.lastRead.Load()).Add(s.timeout / 2)
	wait := time.Until(deadline)
	if wait <= 0 {
		s.suspendTooLongLocked()
		return
	}
	s.strictT = time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.isUp && s.err == nil {
			s.suspendTooLongLocked()
		}
	})
}

func (s *Session) suspendTooLongLocked() {
	s.void = true
	s.log.Warn("zookeeper connection down long enough that the session may have expired; holdings reported lost", "session", fmt.Sprintf("0x%x", s.id))
	s.voidHoldsLocked()
}

func (s *Session) voidHoldsLocked() {
	for ch := range s.holds {
		close(ch)
	}
	clear(s.holds)
}

// hold registers a holding. The returned channel closes when the holding is
// void: the session ended or, in strict mode, stayed disconnected too long.
// release closes it and forgets it; it is idempotent.
func (s *Session) hold() (lost <-chan struct{}, release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.err != nil || s.void {
		close(ch)
		s.mu.Unlock()
		return ch, func() {}
	}
	s.holds[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.holds[ch]; ok {
			delete(s.holds, ch)
			close(ch)
		}
	}
}

// awaitUp waits until the session is connected, ctx ends or the session is over.
func (s *Session) awaitUp(ctx context.Context) error {
	s.mu.Lock()
	up, err := s.up, s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-up:
		return nil
	case <-s.done:
		return s.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// zkLogger passes the client's messages to the session's logger at debug level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
}
