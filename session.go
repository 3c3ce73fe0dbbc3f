package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/stream"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Session is one ZooKeeper session and its life: connected, suspended
// (connection down, session possibly still alive on the server), and over
// (expired by the server, or closed). Every recipe value is bound to one
// Session; when the Session is over, everything obtained through it is void.
//
// A Session never continues on a new session after the server expired it:
// once Done is closed, every call returns an error that wraps
// ErrSessionExpired or ErrSessionClosed, and a new Session must be made.
//
// A Session is safe for concurrent use. It costs the client's two
// goroutines, and one more in strict mode.
type Session struct {
	c      *zkclient.Client
	log    *slog.Logger
	acl    []zkclient.ACL
	strict float64 // strict mode's margin, a fraction of the session timeout; 0: off
	stats  counters
	obs    *Observer // nil: none

	mu         sync.Mutex                         // never held while calling the client: onState runs under the client's lock
	over       bool                               // the session is over
	holds      map[chan struct{}]func(LossReason) // see hold
	voided     LossReason                         // why the holdings were last void
	void       bool                               // strict mode: holdings were reported lost and no answer came since
	subs       []*stream.Queue[SessionEvent]      // see States
	lostTold   bool                               // Lost was told and neither Reconnected nor the end since
	final      *SessionEvent                      // the final state, once told
	strictDone chan struct{}
	rearm      chan struct{}  // strict mode: the timeout may have changed (a reconnection)
	background sync.WaitGroup // deletes that outlived their caller (see removeLater)

	grMu          sync.Mutex               // guards the grant routes (grant.go)
	grKey         string                   // the session key in its granting contenders' UUIDs
	routes        map[string]*grantRoute   // by lock path
	warming       map[string][]*routePin   // lock paths whose route is being set up (see warmRoute)
	retiring      map[string]chan struct{} // lock paths whose route is being taken down, closed when done (see retire)
	grGone        int64                    // events of the routes taken down (see grantEvents)
	grUnsupported atomic.Bool              // the server refused a recursive watch: no routes
	grLinger      time.Duration            // how long an unused route is kept (routeLinger; tests shorten it)
	grClosed      bool                     // Close has begun: no route starts

	svcMu    sync.Mutex                // guards services
	services map[string]*sharedService // the service caches, by service path (see Discovery.ServiceCache)
}

// SessionOption configures a Session.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	log    *slog.Logger
	acl    []zkclient.ACL
	strict float64
	client []zkclient.Option
	obs    *Observer
	linger time.Duration
}

// WithLogger sends the session's life events (connected, suspended,
// reconnected, expired) and the recipes' warnings to l, and gives l to the
// client. By default nothing is logged.
func WithLogger(l *slog.Logger) SessionOption {
	return func(c *sessionConfig) { c.log = l }
}

// WithClientOptions passes options to the underlying zkclient.Client: the
// session timeout (zkclient.WithSessionTimeout, default 10s; Timeout
// reports the one the server granted), credentials
// (zkclient.WithDigestAuth, zkclient.WithSASL), TLS (zkclient.WithTLS), a
// chroot (zkclient.WithChroot, or a suffix of the connect string), a
// dialer, a connect timeout... The Session's own options are those it acts
// on itself: WithLogger, WithACL, WithStrict, WithStrictMargin and
// WithGrantLinger.
func WithClientOptions(opts ...zkclient.Option) SessionOption {
	return func(c *sessionConfig) { c.client = append(c.client, opts...) }
}

// WithACL sets the ACL of every node the recipes create, including the
// missing parents of a recipe path, and of the nodes the data plane
// creates with a nil ACL (default: world, all permissions). Use
// zkclient.DigestACL with zkclient.WithDigestAuth, zkclient.SASLACL with
// zkclient.WithSASL, or zkclient.AuthACL with either, to restrict them; create shared
// ancestors beforehand if other clients must write under them.
func WithACL(acl []zkclient.ACL) SessionOption {
	return func(c *sessionConfig) { c.acl = acl }
}

// WithGrantLinger sets how long the session keeps a grant route on a lock
// path that none of its contenders uses any more (see WithGrants): a
// minute by default. Shorter frees the route's watch, goroutine and
// server nodes sooner, and costs the route's set-up (two round trips, two
// writes) again when the session next waits there. d must be positive.
func WithGrantLinger(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.linger = d }
}

// WithStrict makes holdings (locks, leadership, membership) report loss as
// soon as the server could be about to expire the session, not only once
// it has: when half the negotiated session timeout has passed since the
// send time of the newest request or ping the server answered.
//
// The bound is exact: a reply to a request sent at time s proves that the
// server heard the session at or after s, so it cannot expire the session
// before s + timeout. Lost closes by s + timeout/2 (plus the few
// milliseconds a timer may be late), whatever the state of the connection
// (a silent link, a stalled server, a slow link), leaving the holder half
// the timeout to stop. On a link whose round trip is longer than the
// margin, holdings read as lost from the start. In strict mode the client
// pings every quarter of the margin, busy or idle, so holdings stay valid
// on links whose round trip is below three quarters of the margin (1.1 s
// with a 3 s timeout) and read as lost on slower ones.
//
// The server that answers is assumed to speak for the ensemble. A follower
// cut off from its leader goes on answering its clients until it notices,
// after syncLimit x tickTime, while the leader may expire their sessions:
// use a session timeout above syncLimit x tickTime plus the margin (with
// ZooKeeper's sample configuration, 5 x 2 s = 10 s).
//
// The promise is made to a process that runs: Lost is closed by a timer
// of the holder's own process. A holder whose process is frozen (SIGSTOP,
// a suspended virtual machine, a starved machine) cannot be told anything
// while it is frozen. If it is frozen at s + timeout/2, Lost closes only
// once the process runs again, and its other goroutines may run first and
// still see Lost open; if the freeze outlasted s + timeout, the server may
// meanwhile have expired the session and granted the holding to another
// client. Precisely: Lost is open at time t only if t < s + timeout/2,
// or if the process was frozen at s + timeout/2 and its timer has not run
// since it resumed. A check the acting goroutine makes itself, that
// time.Since(s.Client().Confirmed()) is below the margin, has no such
// window, but a freeze right after it has the same effect. Only a fencing
// token (Mutex.Token) checked by the guarded resource protects against a
// holder that is frozen while it holds.
//
// A holder whose Lost channel closed must assume it no longer holds, even
// if the session turns out to have survived; it should release (Unlock,
// Resign) and acquire again.
func WithStrict() SessionOption { return WithStrictMargin(0.5) }

// WithStrictMargin is WithStrict with another margin: holdings are
// reported lost once fraction x timeout has passed since the newest
// answered send. fraction must be in (0, 1); smaller is safer against a
// slow holder, larger tolerates slower links.
func WithStrictMargin(fraction float64) SessionOption {
	return func(c *sessionConfig) { c.strict = fraction }
}

// NewSession connects to one of servers ("host:port", or a ZooKeeper
// connect string "h1:2181,h2:2181/chroot") and establishes a session. It
// returns when the session is established, or with an error when ctx ends
// first (a deadline on ctx is the connect timeout) or authentication fails.
func NewSession(ctx context.Context, servers []string, opts ...SessionOption) (*Session, error) {
	cfg := sessionConfig{acl: zkclient.WorldACL(zkclient.PermAll), linger: routeLinger}
	for _, o := range opts {
		o(&cfg)
	}
	if len(servers) == 0 {
		return nil, errors.New("zkrecipes: no ZooKeeper servers given")
	}
	for _, a := range servers {
		if a == "" {
			return nil, errorf("empty server address in %q", servers)
		}
	}
	if cfg.strict < 0 || cfg.strict >= 1 {
		return nil, fmt.Errorf("%w: strict margin %v is not in (0, 1)", ErrInvalidArgument, cfg.strict)
	}
	if cfg.linger <= 0 {
		return nil, fmt.Errorf("%w: grant linger %v is not positive", ErrInvalidArgument, cfg.linger)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		log:    cfg.log,
		acl:    cfg.acl,
		strict: cfg.strict,
		obs:    cfg.obs,
		holds:  make(map[chan struct{}]func(LossReason)),
		rearm:  make(chan struct{}, 1),

		grLinger: cfg.linger,
	}
	copts := append([]zkclient.Option{
		zkclient.WithLogger(cfg.log),
		zkclient.WithStateCallback(s.onState),
	}, cfg.client...)
	if s.strict > 0 {
		// Keep the newest answered send well inside the margin, busy or
		// idle: a ping every quarter of the margin.
		copts = append(copts, zkclient.WithPingFraction(s.strict/4))
	}
	c, err := zkclient.Connect(ctx, servers, copts...)
	if err != nil {
		return nil, errorf("connect %q: %w", servers, err)
	}
	s.c = c
	if s.strict > 0 {
		s.strictDone = make(chan struct{})
		go s.watchStrict()
	}
	return s, nil
}

// Client returns the session's ZooKeeper client, for reading and writing
// nodes of one's own on the same session (and connection) as the recipes.
func (s *Session) Client() *zkclient.Client { return s.c }

// ID returns the session id the server assigned.
func (s *Session) ID() int64 { return s.c.SessionID() }

// Credentials returns the session id and password, with which a second
// connection can attach to this session. It is meant for tools and tests
// (zktest.ExpireSession); anyone holding them can end the session.
func (s *Session) Credentials() (id int64, password []byte) { return s.c.Credentials() }

// Timeout returns the session timeout the server granted.
func (s *Session) Timeout() time.Duration { return s.c.Timeout() }

// Connected reports whether the session currently has a live connection.
func (s *Session) Connected() bool { return s.c.State().Live() }

// Server returns the address of the server the session is connected (or
// was last connected) to.
func (s *Session) Server() string { return s.c.Server() }

// Done returns a channel closed when the session is over: expired by the
// server or closed.
func (s *Session) Done() <-chan struct{} { return s.c.Done() }

// Err returns nil while the session lives, then why it ended: an error
// wrapping ErrSessionExpired or ErrSessionClosed.
func (s *Session) Err() error { return s.c.Err() }

// Close ends the session: the server deletes its ephemeral nodes at once,
// so every lock, leadership and membership held through it is released.
// It waits for the server's confirmation for at most 2 seconds; without
// it (a dead link), Close returns an error wrapping
// zkclient.ErrCloseUnconfirmed, and the nodes go when the server expires
// the session. Either way the Session is over. Closing again returns nil.
func (s *Session) Close() error {
	// The server may end the session as soon as the close request reaches
	// it, before its answer comes back: every holding is void from now.
	s.mu.Lock()
	s.over = true
	s.voidHoldsLocked(LossClosed)
	s.mu.Unlock()
	err := s.c.Close()
	if s.strictDone != nil {
		<-s.strictDone
	}
	s.closeRoutes()
	s.background.Wait()
	if err != nil {
		return errorf("close session: %w", err)
	}
	return nil
}

// onState follows the client's state changes. It runs on the client's
// goroutine, under the client's lock: it must not call the client.
func (s *Session) onState(ev zkclient.StateEvent) {
	out := SessionEvent{State: sessionState(ev.State), Server: ev.Server, Err: ev.Err}
	switch {
	case ev.State.Final():
		s.mu.Lock()
		s.over = true
		why := LossClosed
		if ev.State == zkclient.StateExpired {
			why = LossExpired
		}
		s.voidHoldsLocked(why)
		s.tellLostLocked()
		s.final = &out
		s.tellLocked(out)
		s.mu.Unlock()
	case ev.State == zkclient.StateReconnected:
		select {
		case s.rearm <- struct{}{}: // the server may have granted another timeout
		default:
		}
		s.mu.Lock()
		void := s.void
		s.lostTold = false
		s.tellLocked(out)
		s.mu.Unlock()
		if void {
			s.log.Warn("zookeeper session reconnected after holdings were reported lost")
		}
	case ev.State == zkclient.StateSuspended:
		s.mu.Lock()
		s.tellLocked(out)
		s.mu.Unlock()
	}
}

// tellLostLocked tells the subscribers that the holdings are void, once
// until the next reconnection.
func (s *Session) tellLostLocked() {
	if !s.lostTold {
		s.lostTold = true
		s.tellLocked(SessionEvent{State: SessionLost})
	}
}
