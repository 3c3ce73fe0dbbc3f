package zkserver

import (
	"bufio"
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
	auth     []jute.ID
	recv     int64
	sent     int64
	lastOp   string
	lastCxid int32
	lastZxid int64
	est      time.Time

	mu      sync.Mutex
	out     []frame
	closing bool // close once out is written
	wake    chan struct{}
	done    chan struct{} // closed when the writer has exited
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

// reply queues a reply: header then body.
func (c *conn) reply(xid int32, zxid int64, code int32, body []byte) {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}
	h.Encode(e)
	if code == 0 {
		e.Raw(body)
	}
	c.sent++
	c.send(e.Frame())
}

// notify queues a watch notification.
func (c *conn) notify(typ int32, path string) {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1}
	h.Encode(e)
	ev := jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: path}
	ev.Encode(e)
	c.sent++
	c.send(e.Frame())
}

// serve runs the connection: a four-letter word or a handshake, then
// requests until the connection fails or is closed.
func (c *conn) serve() {
	defer c.srv.connGone(c)
	go c.writeLoop()
	r := bufio.NewReader(c.nc)
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	if cmd := string(hdr[:]); isFourLetter(cmd) {
		c.send([]byte(c.srv.fourLetter(cmd)))
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
		req, err := jute.DecodeRequest(p)
		if errors.Is(err, jute.ErrBadRecord) {
			req = jute.Request{Xid: req.Xid, Op: -1} // answered with MarshallingError
		} else if err != nil {
			return // not even a header: drop the connection
		}
		if !c.srv.process(c, &req) {
			return
		}
	}
}
