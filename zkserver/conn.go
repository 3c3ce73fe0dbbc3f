package zkserver

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// conn is one client connection. Its reader goroutine decodes requests and
// hands them to the server; its writer goroutine drains an unbounded queue
// of frames, so the server never blocks on a slow client while it holds
// its lock.
type conn struct {
	srv *Server
	nc  net.Conn
	ip  string

	// Guarded by srv.mu.
	sess     *session
	sid      int64     // the session the connection has or last had, for cons, wchc and dump
	auth     []jute.ID // identities, in the order they were added
	sasl     saslState
	recv     int64
	sent     int64
	lastOp   string
	lastCxid int32
	lastZxid int64
	lastResp time.Time
	lat      latency
	est      time.Time

	mu      sync.Mutex
	out     []frame
	closing bool // close once out is written
	wake    chan struct{}
	done    chan struct{} // closed when the writer has exited
}

// countRecv counts a packet received. Called with srv.mu held.
func (c *conn) countRecv() {
	c.recv++
	c.srv.stats.received++
}

// countSent counts a packet sent. Called with srv.mu held.
func (c *conn) countSent() {
	c.sent++
	c.srv.stats.sent++
}

// resetStats answers crst for this connection, as ZooKeeper's
// ServerCnxn.resetStats does.
func (c *conn) resetStats() {
	c.recv, c.sent, c.lat = 0, 0, latency{}
	c.lastOp, c.lastCxid, c.lastZxid, c.lastResp = "NA", -1, -1, time.Time{}
}

func newConn(s *Server, nc net.Conn) *conn {
	ip := "unknown"
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	return &conn{
		srv:  s,
		nc:   nc,
		ip:   ip,
		auth: []jute.ID{{Scheme: "ip", ID: ip}},
		est:  time.Now(),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// frame is a queued frame and the number of log records that must be
// durable before it is written: with a DataDir, nothing a client sees
// may depend on a transaction a crash could lose.
type frame struct {
	b    []byte
	need uint64
}

// send queues a frame.
func (c *conn) send(b []byte) {
	var need uint64
	if w := c.srv.wal; w != nil {
		need = w.position()
	}
	c.mu.Lock()
	if !c.closing {
		c.out = append(c.out, frame{b, need})
	}
	c.mu.Unlock()
	c.signal()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// closeAfterFlush closes the connection once the queued frames are
// written.
func (c *conn) closeAfterFlush() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.signal()
}

// closeNow closes the connection at once, dropping queued frames.
func (c *conn) closeNow() {
	c.mu.Lock()
	c.closing = true
	c.out = nil
	c.mu.Unlock()
	c.nc.Close()
	c.signal()
}

// writeLoop writes queued frames, each once the log records it depends
// on are durable, until the connection closes.
func (c *conn) writeLoop() {
	defer close(c.done)
	defer c.nc.Close()
	w := bufio.NewWriter(c.nc)
	for range c.wake {
		for {
			durable, synced, err := ^uint64(0), (<-chan struct{})(nil), error(nil)
			if c.srv.wal != nil {
				durable, synced, err = c.srv.wal.state()
			}
			if err != nil {
				return // the log failed: what is queued may never be durable
			}
			c.mu.Lock()
			n := 0
			for n < len(c.out) && c.out[n].need <= durable {
				n++
			}
			out := c.out[:n:n]
			c.out = c.out[n:]
			waiting := len(c.out) > 0
			closing := c.closing && !waiting
			c.mu.Unlock()
			for _, f := range out {
				if _, err := w.Write(f.b); err != nil {
					return
				}
			}
			if err := w.Flush(); err != nil || closing {
				return
			}
			if !waiting {
				break
			}
			<-synced
		}
	}
}

// reply queues a reply: header then, if code is 0, body.
func (c *conn) reply(xid int32, zxid int64, code int32, body []byte) {
	if code != 0 {
		body = nil
	}
	c.replyBody(xid, zxid, code, body)
}

// replyBody queues a reply with its body, whatever its code.
func (c *conn) replyBody(xid int32, zxid int64, code int32, body []byte) {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}
	h.Encode(e)
	e.Raw(body)
	c.countSent()
	c.send(e.Frame())
}

// notify queues a watch notification.
func (c *conn) notify(typ int32, path string) {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1}
	h.Encode(e)
	ev := jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: path}
	ev.Encode(e)
	c.countSent()
	c.send(e.Frame())
}

// serve runs the connection: the TLS handshake on the secure port, then
// a four-letter word or a session handshake, then requests until the
// connection fails or is closed.
func (c *conn) serve() {
	defer c.srv.connGone(c)
	go c.writeLoop()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.srv.handshake(c, tc) {
		return
	}
	r := bufio.NewReader(c.nc)
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	if cmd := string(hdr[:]); isFourLetter(cmd) {
		if cmd == "stmk" {
			var mask [8]byte
			if _, err := io.ReadFull(r, mask[:]); err != nil {
				return
			}
			c.send([]byte(c.srv.setTraceMask(c, int64(binary.BigEndian.Uint64(mask[:])))))
		} else {
			c.send([]byte(c.srv.fourLetter(c, cmd)))
		}
		c.closeAfterFlush()
		return
	}
	p, err := jute.ReadFrameBody(r, int32(binary.BigEndian.Uint32(hdr[:])), c.srv.opts.MaxFrame)
	if err != nil {
		return
	}
	var req jute.ConnectRequest
	d := jute.NewDecoder(p)
	req.Decode(d)
	if d.Err() != nil || !c.srv.connect(c, &req) {
		return
	}
	for {
		p, err := jute.ReadFrame(r, c.srv.opts.MaxFrame)
		if err != nil {
			return
		}
		start := time.Now()
		req, err := jute.DecodeRequest(p)
		var bad *malformed
		if errors.Is(err, jute.ErrBadRecord) {
			bad = &malformed{writesOnly: req.Op == jute.OpMultiRead && onlyWrites(p)}
		} else if err != nil {
			return // not even a header: drop the connection
		}
		if !c.srv.process(c, &req, start, bad) {
			return
		}
	}
}

// malformed describes a request whose header decoded but whose record
// did not.
type malformed struct {
	writesOnly bool // a multiRead whose operations are all writes
}

// onlyWrites reports whether the multiRead payload p would decode as a
// multi: all its operations are well-formed writes.
func onlyWrites(p []byte) bool {
	q := append([]byte(nil), p...)
	binary.BigEndian.PutUint32(q[4:8], uint32(jute.OpMulti))
	_, err := jute.DecodeRequest(q)
	return err == nil
}
