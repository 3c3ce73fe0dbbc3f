package zkclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/internal/stream"
	"github.com/zkrecipes/zkrecipes/internal/zkpath"
)

// Client is one ZooKeeper session, kept alive over connections to the
// servers of one ensemble. Requests are sent in call order on the current
// connection and answered in that order; every call that waits takes a
// context and returns as soon as it ends. When the connection fails the
// client moves to the next server and resumes the session there, with its
// watches and credentials; requests in flight fail with ErrConnectionLoss
// (they may or may not have been applied). When the server expires the
// session the Client is over: it never opens a new session by itself.
//
// A Client costs two goroutines (one reads, one writes and reconnects) and
// a few kilobytes of buffers. It is safe for concurrent use.
type Client struct {
	cfg     config
	servers []string
	chroot  string
	log     *slog.Logger
	epoch   time.Time // base of the monotonic clock readings kept as int64

	mu      sync.Mutex
	state   State
	err     error // why the session is over, once it is
	closing bool  // Close has sent closeSession: whatever follows ends as closed
	id      int64
	passwd  []byte
	timeout time.Duration // negotiated
	server  string        // address of the current (or last) connection
	next    int           // index in servers of the next to try
	move    *movePlan     // set by SetServers when the client must move, until it connects
	cn      *conn         // the live connection, or nil
	up      chan struct{} // closed while a connection is live; replaced when it drops
	auths   []authInfo
	subs    []*stream.Queue[StateEvent]

	notified  atomic.Int64 // watch notifications received
	lastZxid  atomic.Int64
	confirmed atomic.Int64 // nanoseconds since epoch: send time of the newest request or ping answered
	xid       atomic.Int32

	watches watchTable

	done    chan struct{}  // closed when the session is over
	stopped chan struct{}  // closed when the client's goroutines have ended
	bg      sync.WaitGroup // helpers beside run (WithFollowConfig); Close waits for them
}

// StateEvent is one change of a Client's state.
type StateEvent struct {
	State  State
	Server string // the server connected to, for Connected and Reconnected
	Err    error  // why, for Suspended and the final states
}

// Connect opens a session on one of servers and returns once the server
// has granted it (and accepted the credentials of WithAuth), or with an
// error when ctx ends first or the options are wrong. Each element of
// servers is "host:port" or a comma-separated list of them; the last may
// end with a chroot ("h1:2181,h2:2181/app"). The servers are tried in a
// random order, each for the connect timeout, round after round, until ctx
// ends. Host names are resolved at each connection attempt, so a server
// whose name moves to a new address is found there on the next
// reconnection; SetServers and WithFollowConfig change the list itself.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	addrs, chroot, err := ParseServers(strings.Join(servers, ","))
	if err != nil {
		return nil, err
	}
	if cfg.chroot != "" {
		if chroot != "" && chroot != cfg.chroot {
			return nil, fmt.Errorf("zookeeper: chroot %q in the server list and %q in WithChroot disagree", chroot, cfg.chroot)
		}
		chroot = cfg.chroot
	}
	if chroot != "" {
		if err := zkpath.Check(chroot); err != nil {
			return nil, fmt.Errorf("%w: chroot %q: %v", ErrInvalidPath, chroot, err)
		}
		if chroot == "/" {
			chroot = ""
		}
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("zookeeper: session timeout %v is not positive", cfg.timeout)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.shuffle {
		rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	}
	c := &Client{
		cfg:     cfg,
		servers: addrs,
		chroot:  chroot,
		log:     cfg.log,
		epoch:   time.Now(),
		timeout: cfg.timeout,
		id:      cfg.resumeID,
		passwd:  cfg.resumePasswd,
		auths:   cfg.auth,
		up:      make(chan struct{}),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	c.watches.init(c)
	cn, err := c.dialRound(ctx, true)
	if err != nil {
		c.finish(StateClosed, ErrClosed)
		close(c.stopped)
		return nil, err
	}
	go c.run(cn)
	if err := awaitAuth(ctx, cn.primed); err != nil {
		c.finish(StateClosed, ErrClosed)
		<-c.stopped
		return nil, fmt.Errorf("zookeeper: authenticate: %w", err)
	}
	if o := c.cfg.obs; o != nil && o.Opened != nil {
		o.Opened(c)
	}
	if c.cfg.follow {
		c.bg.Add(1)
		go c.follow()
	}
	return c, nil
}

// ParseServers splits a ZooKeeper connect string ("h1:2181,h2:2181/app")
// into server addresses and a chroot ("" if none). A server without a port
// gets 2181.
func ParseServers(s string) (servers []string, chroot string, err error) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s, chroot = s[:i], s[i:]
	}
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.Contains(a, ":") || strings.HasSuffix(a, "]") {
			a += ":2181"
		}
		servers = append(servers, a)
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("zookeeper: no server address in %q", s)
	}
	return servers, chroot, nil
}

// now returns the client's monotonic clock, in nanoseconds since epoch.
func (c *Client) now() int64 { return int64(time.Since(c.epoch)) }

// SessionID returns the session's id.
func (c *Client) SessionID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Credentials returns the session id and password, with which another
// connection can attach to the session (WithSession). Whoever holds them
// can end the session.
func (c *Client) Credentials() (id int64, password []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id, append([]byte(nil), c.passwd...)
}

// Timeout returns the session timeout the server granted on the latest
// connection.
func (c *Client) Timeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeout
}

// Server returns the address of the server of the current, or latest,
// connection.
func (c *Client) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Done returns a channel closed when the session is over (expired, refused
// or closed).
func (c *Client) Done() <-chan struct{} { return c.done }

// Backlog returns the number of events queued for their readers and not
// yet read, summed over the client's unbounded queues: its state streams
// (States) and persistent watches (AddWatch). These queues never drop an
// event, so a reader that falls behind grows them without bound; a
// backlog that keeps rising means some reader is stuck or too slow. It
// takes the client's locks briefly and costs one step per open stream and
// watch: read it now and then (at a metrics scrape), not per request.
func (c *Client) Backlog() int {
	n := 0
	c.mu.Lock()
	for _, s := range c.subs {
		n += s.Len()
	}
	c.mu.Unlock()
	t := &c.watches
	t.mu.Lock()
	for _, ws := range t.pers {
		for _, w := range ws {
			n += w.s.Len()
		}
	}
	t.mu.Unlock()
	return n
}

// Err returns nil while the session lives, then why it ended: an error
// wrapping ErrSessionExpired, ErrAuthFailed or ErrClosed.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Notifications returns the number of watch notifications the server has
// sent this client (one per node event, however many registrants it fires).
func (c *Client) Notifications() int64 { return c.notified.Load() }

// LastZxid returns the newest zxid the client has seen in a reply. A
// server behind it refuses to serve the session, so the client never sees
// the tree go back in time across a failover.
func (c *Client) LastZxid() int64 { return c.lastZxid.Load() }

// Confirmed returns the send time of the newest request or ping the server
// has answered (the handshake counts). The server heard the session at or
// after that time, so it cannot expire the session before Confirmed() plus
// the session timeout; nothing later is known. This is the bound strict
// loss detection is built on.
func (c *Client) Confirmed() time.Time {
	return c.epoch.Add(time.Duration(c.confirmed.Load()))
}

// WaitConnected waits until a connection is live, ctx ends or the session
// is over.
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	up, err := c.up, c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-up:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// States returns a stream of the client's state changes from now on, in
// order, none dropped however slowly it is read. The stream ends (with the
// session's error) after the final state. Call Close on it when no longer
// reading.
func (c *Client) States() *StateStream {
	s := stream.New[StateEvent]()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		s.Push(StateEvent{State: c.state, Err: c.err})
		s.Close(c.err)
	} else {
		c.subs = append(c.subs, s)
	}
	return &StateStream{s: s, c: c}
}

// StateStream is a Client's state changes, read with Next.
type StateStream struct {
	s *stream.Queue[StateEvent]
	c *Client
}

// Next returns the next state change, waiting while ctx allows. After the
// final state it returns the session's error.
func (s *StateStream) Next(ctx context.Context) (StateEvent, error) { return s.s.Next(ctx) }

// Ready returns a channel that is closed when Next has something to return
// at once.
func (s *StateStream) Ready() <-chan struct{} { return s.s.Ready() }

// Close ends the subscription; Next then returns ErrClosed once drained.
// Calling it again does nothing.
func (s *StateStream) Close() {
	s.c.mu.Lock()
	for i, x := range s.c.subs {
		if x == s.s {
			s.c.subs = append(s.c.subs[:i], s.c.subs[i+1:]...)
			break
		}
	}
	s.c.mu.Unlock()
	s.s.Close(ErrClosed)
}

// setStateLocked records a state change and tells the subscribers.
func (c *Client) setStateLocked(st State, err error) {
	c.state = st
	ev := StateEvent{State: st, Server: c.server, Err: err}
	for _, s := range c.subs {
		s.Push(ev)
	}
	for _, f := range c.cfg.onState {
		f(ev)
	}
	if o := c.cfg.obs; o != nil && o.State != nil {
		o.State(ev)
	}
}

// finish ends the session with the final state st and reason err (kept if
// it was already over). Requests in flight and watches fail with it.
func (c *Client) finish(st State, err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if c.closing {
		st, err = StateClosed, ErrClosed
	}
	if st == StateClosed || c.id == 0 { // no session to name
		c.err = err
	} else {
		c.err = fmt.Errorf("%w (session 0x%x)", err, c.id)
	}
	cn := c.cn
	c.cn = nil
	c.setStateLocked(st, c.err)
	for _, s := range c.subs {
		s.Close(c.err)
	}
	c.subs = nil
	close(c.done)
	err = c.err
	c.mu.Unlock()
	if cn != nil {
		cn.fail(err)
	}
	c.watches.end(err)
	switch st {
	case StateExpired:
		c.log.Error("zookeeper session expired", "session", fmt.Sprintf("0x%x", c.id))
	case StateAuthFailed:
		c.log.Error("zookeeper authentication failed; session over", "session", fmt.Sprintf("0x%x", c.id))
	default:
		c.log.Info("zookeeper session closed", "session", fmt.Sprintf("0x%x", c.id))
	}
}

// run keeps the session connected: it serves each connection (writing its
// requests and pings) until it fails, then reconnects, until the session is
// over.
func (c *Client) run(cn *conn) {
	defer close(c.stopped)
	for {
		c.serve(cn)
		<-cn.gone
		if c.Err() != nil {
			return
		}
		c.suspend(cn)
		var err error
		cn, err = c.reconnect()
		if err != nil {
			return // finish was called
		}
	}
}

// suspend records that the connection cn dropped (once: the failing
// connection and the loop that served it both call it).
func (c *Client) suspend(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cn != cn || c.err != nil || c.closing {
		return
	}
	c.cn = nil
	c.up = make(chan struct{})
	c.setStateLocked(StateSuspended, cn.cause())
	c.log.Warn("zookeeper connection lost; session suspended", "session", fmt.Sprintf("0x%x", c.id), "server", cn.addr, "err", cn.cause())
}

// reconnect tries the servers, round after round with a short random
// pause between rounds, until one resumes the session or the session is
// over.
func (c *Client) reconnect() (*conn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for round := 0; ; round++ {
		// A short random pause, also before the first attempt: a client
		// that comes straight back would take the session back from a
		// connection that just moved it (as ZooKeeper's Java client, which
		// waits up to a second).
		pause := time.Duration(50+rand.IntN(150)) * time.Millisecond
		if round > 0 {
			pause += time.Duration(rand.IntN(200)) * time.Millisecond
		}
		{
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil, c.Err()
			}
		}
		cn, err := c.dialRound(ctx, false)
		if err == nil {
			return cn, nil
		}
		if c.Err() != nil {
			return nil, c.Err()
		}
	}
}

// dialRound tries each server once, starting with the next in turn, and
// returns the first connection that establishes (or resumes) the session.
// With first, it keeps going round by round until ctx ends.
func (c *Client) dialRound(ctx context.Context, first bool) (*conn, error) {
	var errs []error
	for round := 0; ; round++ {
		c.mu.Lock()
		n := len(c.servers)
		c.mu.Unlock()
		for range n {
			c.mu.Lock()
			addr := c.nextServerLocked()
			c.mu.Unlock()
			started := time.Now()
			cn, err := c.open(ctx, addr)
			if o := c.cfg.obs; o != nil && o.Connect != nil {
				o.Connect(ConnEvent{Server: addr, Err: err, Latency: time.Since(started)})
			}
			if err == nil {
				return cn, nil
			}
			if errors.Is(err, ErrSessionExpired) {
				c.finish(StateExpired, ErrSessionExpired)
				return nil, c.Err()
			}
			if errors.Is(err, ErrAuthFailed) {
				c.finish(StateAuthFailed, err)
				return nil, c.Err()
			}
			if c.Err() != nil {
				return nil, c.Err()
			}
			c.log.Debug("zookeeper server unreachable", "server", addr, "err", err)
			if len(errs) < 8 {
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrNoServer, errors.Join(append(errs, ctx.Err())...))
			}
		}
		if !first {
			return nil, fmt.Errorf("%w: %w", ErrNoServer, errors.Join(errs...))
		}
		select {
		case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoServer, errors.Join(append(errs, ctx.Err())...))
		}
	}
}

// connectTimeout is how long one server is given to answer the handshake.
func (c *Client) connectTimeout() time.Duration {
	if c.cfg.connectTimeout > 0 {
		return c.cfg.connectTimeout
	}
	c.mu.Lock()
	t, n := c.timeout, len(c.servers)
	c.mu.Unlock()
	return max(min(t/time.Duration(n), t/3), 100*time.Millisecond)
}

// Close ends the session: it asks the server to close it, which deletes
// the session's ephemeral nodes at once, and waits for the answer for at
// most the close timeout (WithCloseTimeout, default 2s). If the server did
// not confirm in time (a dead link, no connection), Close returns an error
// wrapping ErrCloseUnconfirmed: the server will delete the ephemeral nodes
// when the session expires. Either way the Client is over when Close
// returns. Calling Close again returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.err != nil || c.closing {
		c.mu.Unlock()
		<-c.stopped
		c.bg.Wait()
		return nil
	}
	cn := c.cn
	c.closing = true
	c.mu.Unlock()
	var err error
	if cn == nil {
		err = fmt.Errorf("%w: not connected", ErrCloseUnconfirmed)
	} else {
		cl := cn.c.newCall(opCloseSession, "")
		cn.enqueue(&jute.Request{Op: jute.OpCloseSession}, cl, nil)
		t := time.NewTimer(c.cfg.closeTimeout)
		select {
		case <-cl.done:
			if cl.err != nil {
				err = fmt.Errorf("%w: %w", ErrCloseUnconfirmed, cl.err)
			}
		case <-t.C:
			err = fmt.Errorf("%w: no answer within %v", ErrCloseUnconfirmed, c.cfg.closeTimeout)
		}
		t.Stop()
	}
	c.finish(StateClosed, ErrClosed)
	<-c.stopped
	c.bg.Wait()
	return err
}
