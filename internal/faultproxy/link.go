package faultproxy

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// link is one proxied connection: a client connection, the server
// connection dialed for it, and a pipe for each direction. Each pipe has a
// reader goroutine that queues what it reads and a forward goroutine that
// writes the queue out as the proxy's mode allows.
type link struct {
	p              *Proxy
	client, server net.Conn
	up, down       *pipe // client to server, server to client
	done           chan struct{}
	once           sync.Once
	mute           bool // guarded by p.mu: a trap fired, drop server bytes
}

// pipe is one direction of a link.
type pipe struct {
	src, dst net.Conn
	queue    []chunk // guarded by p.mu
	eof      bool    // guarded by p.mu: src is done
	wake     chan struct{}
}

// chunk is a run of bytes read at once: a whole frame from the client, or
// whatever one read returned from the server.
type chunk struct {
	data []byte
	at   time.Time // when it was read
	trap *trap     // the trap this request sprang, or nil
}

func newLink(p *Proxy, client, server net.Conn) *link {
	return &link{
		p:      p,
		client: client,
		server: server,
		up:     &pipe{src: client, dst: server, wake: make(chan struct{}, 1)},
		down:   &pipe{src: server, dst: client, wake: make(chan struct{}, 1)},
		done:   make(chan struct{}),
	}
}

// notify wakes the pipe's forward goroutine.
func (pp *pipe) notify() {
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// readFrames reads the client's stream frame by frame. Every frame after
// the first (the ConnectRequest) starts with a request header whose
// operation code may spring the proxy's trap.
func (l *link) readFrames() {
	defer l.p.wg.Done()
	defer l.end(l.up)
	first := true
	for {
		hdr := make([]byte, 4)
		if _, err := io.ReadFull(l.client, hdr); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr)
		if n > maxFrame {
			// Not ZooKeeper framing, such as a four-letter word.
			l.push(l.up, hdr, false, 0)
			l.copyChunks(l.up)
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, hdr)
		if _, err := io.ReadFull(l.client, frame[4:]); err != nil {
			return
		}
		isRequest := !first && n >= 8
		var op int32
		if isRequest {
			op = int32(binary.BigEndian.Uint32(frame[8:12]))
		}
		first = false
		l.push(l.up, frame, isRequest, op)
	}
}

// readChunks reads the server's stream.
func (l *link) readChunks() {
	defer l.p.wg.Done()
	defer l.end(l.down)
	l.copyChunks(l.down)
}

func (l *link) copyChunks(pp *pipe) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pp.src.Read(buf)
		if n > 0 {
			l.push(pp, append([]byte(nil), buf[:n]...), false, 0)
		}
		if err != nil {
			return
		}
	}
}

// push queues data read from pp's source; a request with operation code op
// may spring the armed trap.
func (l *link) push(pp *pipe, data []byte, isRequest bool, op int32) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	c := chunk{data: data, at: time.Now()}
	if isRequest && p.trap != nil && p.trap.opcode == op {
		c.trap, p.trap = p.trap, nil
	}
	if isRequest && p.pauseOn != nil && p.pauseOn.opcode == op {
		// The request is queued before its reply can come: the reply
		// finds the mode switched.
		p.setModeLocked(modePauseReplies, 0)
		close(p.pauseOn.fired)
		p.pauseOn = nil
	}
	if p.mode == modeBlackhole && c.trap == nil {
		return
	}
	pp.queue = append(pp.queue, c)
	pp.notify()
}

// end records that pp's source has no more bytes.
func (l *link) end(pp *pipe) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	pp.eof = true
	pp.notify()
}

// forward writes pp's queue to its destination as the proxy's mode
// allows. When the source has ended and the queue is drained, or a write
// fails, it closes the link.
func (l *link) forward(pp *pipe) {
	defer l.p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c, wait, ok := l.next(pp)
		if !ok {
			l.close(false)
			return
		}
		if wait != 0 {
			var timeout <-chan time.Time
			if wait > 0 {
				timer.Reset(wait)
				timeout = timer.C
			}
			select {
			case <-pp.wake:
			case <-timeout:
			case <-l.done:
			}
			continue
		}
		if c.trap != nil {
			l.spring(c)
			return
		}
		if _, err := pp.dst.Write(c.data); err != nil {
			l.close(false)
			return
		}
	}
}

// waitForWake is returned by next when there is nothing to do until the
// pipe is notified.
const waitForWake = -1

// next returns the chunk pp may write now, or how long to wait before
// asking again; ok is false when the pipe is finished.
func (l *link) next(pp *pipe) (c chunk, wait time.Duration, ok bool) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-l.done:
		return chunk{}, 0, false
	default:
	}
	if p.mode == modeBlackhole || (pp == l.down && l.mute) {
		pp.queue = keepTraps(pp.queue)
	}
	if len(pp.queue) == 0 {
		return chunk{}, waitForWake, !pp.eof
	}
	c = pp.queue[0]
	switch p.mode {
	case modePause:
		return chunk{}, waitForWake, true
	case modePauseReplies:
		if pp == l.down {
			return chunk{}, waitForWake, true
		}
	case modeDelay:
		if d := time.Until(c.at.Add(p.delay)); d > 0 {
			return chunk{}, d, true
		}
	}
	pp.queue[0] = chunk{}
	pp.queue = pp.queue[1:]
	return c, 0, true
}

// keepTraps drops the chunks of q that sprang no trap.
func keepTraps(q []chunk) []chunk {
	kept := q[:0]
	for _, c := range q {
		if c.trap != nil {
			kept = append(kept, c)
		}
	}
	clear(q[len(kept):])
	return kept
}

// spring fires the trap of request c: from now on nothing more reaches the
// client, the request goes to the server if the trap says so, and the
// link is cut.
func (l *link) spring(c chunk) {
	l.p.mu.Lock()
	l.mute = true
	l.p.mu.Unlock()
	if c.trap.forward {
		l.server.Write(c.data)
	}
	l.close(true)
	close(c.trap.fired)
}

// close closes both connections, resetting the client's if reset is set,
// and forgets the link. A trap sprung by a request the link never handled
// is armed again, unless a newer one was armed since.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		close(l.done)
		if tc, ok := l.client.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		l.client.Close()
		l.server.Close()

		p := l.p
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.links, l)
		for _, c := range l.up.queue {
			if c.trap != nil && p.trap == nil && p.tripped == c.trap.fired {
				p.trap = c.trap
			}
		}
		l.up.queue, l.down.queue = nil, nil
	})
}

// maxFrame is the longest request frame the proxy reads whole (ZooKeeper's
// own limit, jute.maxbuffer, defaults to 1 MiB; the proxy must pass
// anything a server would). A longer length is not ZooKeeper framing.
const maxFrame = 64 << 20
