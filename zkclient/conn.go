package zkclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

const (
	opCloseSession = jute.OpCloseSession
	opPing         = jute.OpPing
)

// conn is one connection to a server, on the session. Requests are
// appended to out in xid order and written by the client's run goroutine;
// replies are read by the conn's own reader goroutine and matched, in
// order, with pending.
type conn struct {
	c    *Client
	nc   net.Conn
	addr string
	br   *bufio.Reader

	readTimeout time.Duration // 2/3 of the negotiated session timeout
	pingEvery   time.Duration // 1/3 of it

	mu       sync.Mutex
	out      []byte  // frames not written yet
	pending  []*call // sent or queued, not answered, in xid order
	pings    []int64 // send times of the pings in flight
	authWait []chan error
	primed   []chan error // the answers to the credentials sent first on this connection
	dead     bool
	err      error

	wake chan struct{} // a frame was queued (capacity 1)
	gone chan struct{} // closed when the reader has stopped: nothing more is read
}

// open dials addr and establishes the session on it (a new one, or ours
// resumed), then starts reading and queues what a new connection needs
// first: the credentials and the watches to restore. It returns the live
// connection, or an error wrapping ErrSessionExpired when the server does
// not know our session anymore.
func (c *Client) open(ctx context.Context, addr string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.connectTimeout())
	defer cancel()
	var sasl saslStart
	if m := c.cfg.sasl; m != nil {
		// Before the handshake: credentials the mechanism cannot get
		// (a KDC's refusal) leave no session behind on the server.
		var err error
		if sasl, err = startSASL(ctx, m, addr); err != nil {
			return nil, err
		}
	}
	dialed := time.Now()
	nc, err := c.dialAddr(ctx, addr)
	if o := c.cfg.obs; o != nil && o.Dial != nil {
		o.Dial(ConnEvent{Server: addr, Err: err, Latency: time.Since(dialed)})
	}
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	c.mu.Lock()
	req := jute.ConnectRequest{
		LastZxidSeen: c.lastZxid.Load(),
		TimeOut:      int32(c.cfg.timeout / time.Millisecond),
		SessionID:    c.id,
		Passwd:       c.passwd,
		HasReadOnly:  true,
	}
	had := c.id != 0
	c.mu.Unlock()
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	e := jute.NewFrameEncoder()
	req.Encode(e)
	sent := c.now()
	br := bufio.NewReaderSize(nc, 1024)
	var resp jute.ConnectResponse
	_, err = nc.Write(e.Frame())
	if err == nil {
		var p []byte
		p, err = jute.ReadFrame(br, 1024)
		if err == nil {
			d := jute.NewDecoder(p)
			resp.Decode(d)
			err = d.Err()
		}
	}
	if !stop() || err != nil {
		nc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if resp.TimeOut <= 0 || (had && resp.SessionID != req.SessionID) {
		nc.Close()
		if had {
			return nil, ErrSessionExpired
		}
		return nil, errors.New("handshake: server granted no session")
	}
	nc.SetDeadline(time.Time{})
	timeout := time.Duration(resp.TimeOut) * time.Millisecond
	cn := &conn{
		c:           c,
		nc:          nc,
		addr:        addr,
		br:          br,
		readTimeout: timeout * 2 / 3,
		pingEvery:   timeout / 3,
		wake:        make(chan struct{}, 1),
		gone:        make(chan struct{}),
	}
	c.confirm(sent)

	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		nc.Close()
		return nil, c.err
	}
	c.id, c.passwd, c.timeout, c.server = resp.SessionID, resp.Passwd, timeout, addr
	c.move = nil // a move SetServers asked for is done
	auths := append([]authInfo(nil), c.auths...)
	c.mu.Unlock()

	if sasl.ex != nil {
		// SASL comes first: until it completes nothing else is sent, not
		// even a ping (a server with sessionRequireClientSASLAuth drops a
		// connection that sends anything else before).
		if err := cn.authenticateSASL(ctx, sasl); err != nil {
			nc.Close()
			return nil, err
		}
	}

	for _, a := range auths {
		cn.primed = append(cn.primed, cn.sendAuth(a))
	}
	go cn.read()
	var err2 error
	// The watches are restored and the connection published under the
	// watch table's lock: a watch removed meanwhile is either in the
	// restore or removed on this connection.
	c.watches.restoreThen(cn, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			err2 = c.err
			return
		}
		c.cn = cn
		close(c.up)
		if had && c.state != StateConnecting {
			c.setStateLocked(StateReconnected, nil)
			c.log.Info("zookeeper session reconnected", "session", fmt.Sprintf("0x%x", c.id), "server", addr, "timeout", timeout)
		} else {
			c.setStateLocked(StateConnected, nil)
			c.log.Info("zookeeper session established", "session", fmt.Sprintf("0x%x", c.id), "server", addr, "timeout", timeout)
		}
	})
	if err2 != nil {
		cn.fail(err2)
		return nil, err2
	}
	return cn, nil
}

// dialAddr opens the network connection to addr, with TLS if configured.
func (c *Client) dialAddr(ctx context.Context, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	if c.cfg.dial != nil {
		nc, err = c.cfg.dial(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	if c.cfg.tls == nil {
		return nc, nil
	}
	cfg := c.cfg.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tc, nil
}

// confirm records that a request sent at sent was answered.
func (c *Client) confirm(sent int64) {
	for {
		old := c.confirmed.Load()
		if sent <= old || c.confirmed.CompareAndSwap(old, sent) {
			return
		}
	}
}

// enqueue queues r with the call cl; it fails cl at once with
// ErrConnectionLoss if the connection is dead, or ErrTooLarge. before, if
// not nil, runs under the connection's lock once the request is queued (the
// watch table counts requests that will set a watch there).
func (cn *conn) enqueue(r *jute.Request, cl *call, before func()) {
	cn.mu.Lock()
	if cn.dead {
		err := cn.err
		cn.mu.Unlock()
		if cl != nil {
			cl.complete(connLoss(err))
		}
		return
	}
	n := len(cn.out)
	if r.Op == jute.OpPing {
		r.Xid = jute.XidPing
	} else {
		r.Xid = cn.c.nextXid()
	}
	cn.out = jute.AppendFrame(cn.out, r)
	if len(cn.out)-n-4 > cn.c.cfg.maxFrame {
		size := len(cn.out) - n - 4
		cn.out = cn.out[:n]
		cn.mu.Unlock()
		if cl != nil {
			cl.complete(fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, size, cn.c.cfg.maxFrame))
		}
		return
	}
	if r.Op == jute.OpPing {
		cn.pings = append(cn.pings, cn.c.now())
	} else {
		cl.xid = r.Xid
		cl.sent = cn.c.now()
		cl.sentBytes = int32(len(cn.out) - n)
		cn.pending = append(cn.pending, cl)
	}
	if before != nil {
		before()
	}
	cn.mu.Unlock()
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// nextXid returns the xid of the next request: they count up from 1 and
// wrap back to 1 after 2^31-1, never reaching the special negative ones.
func (c *Client) nextXid() int32 {
	for {
		old := c.xid.Load()
		next := old + 1
		if next <= 0 {
			next = 1
		}
		if c.xid.CompareAndSwap(old, next) {
			return next
		}
	}
}

// sendAuth queues an auth packet; its answer is matched by xid -4.
func (cn *conn) sendAuth(a authInfo) chan error {
	ch := make(chan error, 1)
	r := jute.Request{Xid: jute.XidAuth, Op: jute.OpAuth, Scheme: a.scheme, Auth: a.auth}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dead {
		ch <- connLoss(cn.err)
		return ch
	}
	cn.out = jute.AppendFrame(cn.out, &r)
	cn.authWait = append(cn.authWait, ch)
	select {
	case cn.wake <- struct{}{}:
	default:
	}
	return ch
}

// awaitAuth waits for the answers to the auth packets whose channels are
// given.
func awaitAuth(ctx context.Context, waits []chan error) error {
	for _, ch := range waits {
		select {
		case err := <-ch:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func connLoss(cause error) error {
	if cause == nil || errors.Is(cause, ErrConnectionLoss) {
		return ErrConnectionLoss
	}
	var code Code
	if errors.As(cause, &code) || errors.Is(cause, ErrClosed) {
		return cause
	}
	return fmt.Errorf("%w: %v", ErrConnectionLoss, cause)
}

// fail ends the connection with err: the socket is closed, and every
// request queued or in flight fails (with ErrConnectionLoss unless err is
// the session's end).
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return
	}
	cn.dead, cn.err = true, err
	pending, auths := cn.pending, cn.authWait
	cn.pending, cn.authWait, cn.out, cn.pings = nil, nil, nil, nil
	cn.mu.Unlock()
	cn.nc.Close()
	if cn.c != nil {
		if o := cn.c.cfg.obs; o != nil && o.Drop != nil {
			o.Drop(ConnEvent{Server: cn.addr, Err: err})
		}
		// Suspended before any caller learns of the loss, so that a
		// caller who waits for the connection to come back (and then
		// sends again) does not find this dead one still up.
		cn.c.suspend(cn)
	}
	e := connLoss(err)
	for _, cl := range pending {
		cl.complete(e)
	}
	for _, ch := range auths {
		ch <- e
	}
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// cause returns why the connection failed.
func (cn *conn) cause() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// serve writes cn's queued frames, and a ping whenever nothing was sent for
// a third of the session timeout, until the connection fails or the
// session is over.
func (c *Client) serve(cn *conn) {
	var spare []byte
	lastSend, lastPing := time.Now(), time.Now()
	eager := time.Duration(0)
	if f := c.cfg.pingFraction; f > 0 {
		eager = max(time.Duration(float64(cn.pingEvery*3)*f), time.Millisecond)
	}
	t := time.NewTimer(cn.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-cn.wake:
		case <-t.C:
		case <-cn.gone:
			return
		case <-c.done:
			cn.fail(c.Err())
			return
		}
		cn.mu.Lock()
		if cn.dead {
			cn.mu.Unlock()
			return
		}
		idle := len(cn.out) == 0 && time.Since(lastSend) >= cn.pingEvery
		if idle || eager > 0 && time.Since(lastPing) >= eager {
			cn.mu.Unlock()
			cn.enqueue(&jute.Request{Op: jute.OpPing}, nil, nil)
			lastPing = time.Now()
			cn.mu.Lock()
		}
		buf := cn.out
		cn.out = spare[:0]
		cn.mu.Unlock()
		if len(buf) > 0 {
			cn.nc.SetWriteDeadline(time.Now().Add(cn.readTimeout))
			if _, err := cn.nc.Write(buf); err != nil {
				cn.fail(fmt.Errorf("write to %s: %w", cn.addr, err))
				return
			}
			lastSend = time.Now()
		}
		if cap(buf) <= 64<<10 {
			spare = buf
		} else {
			spare = nil
		}
		next := cn.pingEvery - time.Since(lastSend)
		if eager > 0 {
			next = min(next, eager-time.Since(lastPing))
		}
		t.Reset(max(next, time.Millisecond))
	}
}

// read reads frames until the connection fails: a read error, nothing heard
// for two thirds of the session timeout, or a frame it cannot make sense of.
func (cn *conn) read() {
	defer close(cn.gone)
	var buf []byte
	var hdr [4]byte
	for {
		if cn.br.Buffered() < 4 {
			cn.nc.SetReadDeadline(time.Now().Add(cn.readTimeout))
		}
		if _, err := io.ReadFull(cn.br, hdr[:]); err != nil {
			cn.fail(readErr(cn, err))
			return
		}
		n := int32(binary.BigEndian.Uint32(hdr[:]))
		if n < 16 || int(n) > cn.c.cfg.maxReply {
			cn.fail(fmt.Errorf("read from %s: %w: %d", cn.addr, jute.ErrFrameSize, n))
			return
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(cn.br, buf); err != nil {
			cn.fail(readErr(cn, err))
			return
		}
		if err := cn.handle(buf); err != nil {
			cn.fail(fmt.Errorf("from %s: %w", cn.addr, err))
			return
		}
		if cap(buf) > 64<<10 {
			buf = nil
		}
	}
}

func readErr(cn *conn, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("nothing heard from %s for %v", cn.addr, cn.readTimeout)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s closed the connection", cn.addr)
	}
	return fmt.Errorf("read from %s: %w", cn.addr, err)
}

// errProtocol reports a reply the client cannot match or decode.
var errProtocol = errors.New("zookeeper: protocol error")

// handle processes one frame from the server.
func (cn *conn) handle(p []byte) error {
	c := cn.c
	d := jute.NewDecoder(p)
	var h jute.ReplyHeader
	h.Decode(d)
	switch h.Xid {
	case jute.XidNotification:
		var ev jute.WatcherEvent
		ev.Decode(d)
		if d.Err() != nil {
			return fmt.Errorf("%w: notification: %v", errProtocol, d.Err())
		}
		c.watches.dispatch(c, ev)
		return nil
	case jute.XidPing:
		cn.mu.Lock()
		if len(cn.pings) == 0 {
			cn.mu.Unlock()
			return fmt.Errorf("%w: unexpected ping reply", errProtocol)
		}
		sent := cn.pings[0]
		cn.pings = cn.pings[1:]
		cn.mu.Unlock()
		c.confirm(sent)
		return nil
	case jute.XidAuth:
		cn.mu.Lock()
		var ch chan error
		if len(cn.authWait) > 0 {
			ch = cn.authWait[0]
			cn.authWait = cn.authWait[1:]
		}
		cn.mu.Unlock()
		if h.Err != 0 {
			err := Code(h.Err)
			if ch != nil {
				ch <- err
			}
			if err == ErrAuthFailed {
				c.finish(StateAuthFailed, ErrAuthFailed)
			}
			return nil
		}
		if ch != nil {
			ch <- nil
		}
		return nil
	case jute.XidSetWatches:
		if h.Err != 0 {
			c.log.Warn("zookeeper refused to restore watches", "err", Code(h.Err))
		}
		return nil
	}
	cn.mu.Lock()
	if len(cn.pending) == 0 || cn.pending[0].xid != h.Xid {
		cn.mu.Unlock()
		return fmt.Errorf("%w: reply with xid %d out of order", errProtocol, h.Xid)
	}
	cl := cn.pending[0]
	cn.pending[0] = nil
	cn.pending = cn.pending[1:]
	if len(cn.pending) == 0 {
		cn.pending = cn.pending[:0:0]
	}
	cn.mu.Unlock()
	if h.Zxid > 0 {
		for {
			old := c.lastZxid.Load()
			if h.Zxid <= old || c.lastZxid.CompareAndSwap(old, h.Zxid) {
				break
			}
		}
	}
	c.confirm(cl.sent)
	cl.zxid = h.Zxid
	cl.readBytes = int32(len(p) + 4)
	if h.Err != 0 {
		code := Code(h.Err)
		if code == ErrSessionExpired {
			c.finish(StateExpired, ErrSessionExpired)
		}
		cl.complete(code)
		return nil
	}
	if cl.decode != nil {
		if err := cl.decode(d); err == nil && d.Err() != nil {
			cl.complete(fmt.Errorf("%w: reply to op %d: %v", ErrMarshalling, cl.op, d.Err()))
			return nil
		} else if err != nil {
			cl.complete(err)
			return nil
		}
	}
	cl.complete(nil)
	return nil
}
