// Package faultproxy is a TCP proxy that puts faults between one ZooKeeper
// client and one server: delays, pauses, a black hole, cut connections
// and a trap that cuts a connection right after a chosen request. zktest
// offers it to tests as zktest.Proxy; zkr's demonstrations use it too.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// mode is how a Proxy treats the bytes it reads.
type mode int

const (
	modePass mode = iota
	modeDelay
	modePause
	modePauseReplies
	modeBlackhole
)

// Proxy is a TCP proxy for putting faults between one ZooKeeper client and
// one server. It accepts connections on a loopback address and connects
// each to the current target. Forwarding is switched for all connections
// at once, current and new, by Pass, Delay, Pause, PauseReplies and
// Blackhole. Cut and CutOnRequest break connections, and Refuse turns new
// ones away.
//
// In the client-to-server direction the proxy reads whole ZooKeeper frames
// (a 4-byte big-endian length and the record) and forwards each in one
// write; the other direction is forwarded in chunks as read. A stream
// that is not framed like ZooKeeper, such as a four-letter word, is
// forwarded in chunks too. A Proxy is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // done when the proxy is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	target  string
	mode    mode
	delay   time.Duration
	refuse  bool
	trap    *trap         // armed trap, or nil
	tripped chan struct{} // of the latest trap
	pauseOn *pauseTrap    // armed by PauseRepliesOnRequest, or nil
	links   map[*link]bool
	closed  bool
}

// trap is armed by CutOnRequest.
type trap struct {
	opcode  int32
	forward bool
	fired   chan struct{}
}

// pauseTrap is armed by PauseRepliesOnRequest.
type pauseTrap struct {
	opcode int32
	fired  chan struct{}
}

// New starts a proxy listening on 127.0.0.1 on a free port that
// forwards to target, in pass mode.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		target:  target,
		tripped: make(chan struct{}),
		links:   make(map[*link]bool),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address ("127.0.0.1:port") clients connect to.
func (p *Proxy) Addr() string {
	return p.ln.Addr().String()
}

// SetTarget makes new connections go to addr. Current connections keep
// their server.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Pass makes the proxy forward bytes as soon as they arrive, which is the
// default. Bytes held by Pause or Delay are released at once, in order.
func (p *Proxy) Pass() { p.setMode(modePass, 0) }

// Delay makes the proxy forward every chunk, in both directions, d after
// it arrived; order is kept. Delay(0) is Pass.
func (p *Proxy) Delay(d time.Duration) {
	if d <= 0 {
		p.Pass()
		return
	}
	p.setMode(modeDelay, d)
}

// Pause makes the proxy hold all bytes in both directions: it keeps
// reading and buffers them, and connections stay open. Pass (or Delay)
// releases the bytes in order; Cut discards them.
func (p *Proxy) Pause() { p.setMode(modePause, 0) }

// PauseReplies makes the proxy hold the bytes from the server (answers,
// watch events) while it forwards the client's requests: the server
// applies them and the client hears nothing back, as when an answer is
// late. Pass (or Delay) releases the held bytes in order; Cut discards
// them. Held for long, the client's pings go unanswered too and it drops
// the connection.
func (p *Proxy) PauseReplies() { p.setMode(modePauseReplies, 0) }

// Blackhole makes the proxy read and silently drop all bytes in both
// directions, including bytes held by Pause or Delay; connections stay
// open, as in a network partition that loses packets.
func (p *Proxy) Blackhole() { p.setMode(modeBlackhole, 0) }

func (p *Proxy) setMode(m mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setModeLocked(m, d)
}

func (p *Proxy) setModeLocked(m mode, d time.Duration) {
	p.mode, p.delay = m, d
	for l := range p.links {
		l.up.notify()
		l.down.notify()
	}
}

// Cut closes every current connection on both sides now, discarding bytes
// in flight; the client side is reset. New connections are accepted as
// before, and the forwarding mode does not change.
func (p *Proxy) Cut() {
	for _, l := range p.current() {
		l.close(true)
	}
}

// Refuse, when on, makes the proxy close every new connection as soon as
// it is accepted, as if the server were down. Current connections are not
// affected; Refuse(false) accepts connections again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// CutOnRequest arms a one-shot trap on the next client-to-server request
// (on any connection) whose operation code is opcode, such as 1 for
// create, 2 for delete or 14 for multi. When the trap fires, the request
// is forwarded to the server if forward is true and dropped otherwise, and
// then the connection is cut at once: no byte the server sends after the
// request, in particular its reply, reaches the client. The client sees a
// connection loss without knowing whether the request was applied.
//
// The first frame of a connection (the ConnectRequest) never matches. A
// new call replaces a trap that has not fired yet. See Tripped.
func (p *Proxy) CutOnRequest(opcode int32, forward bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trap = &trap{opcode: opcode, forward: forward, fired: make(chan struct{})}
	p.tripped = p.trap.fired
}

// PauseRepliesOnRequest arms a one-shot trap on the next client-to-server
// request (on any connection) whose operation code is opcode: the request
// is forwarded, and from then on the proxy is in PauseReplies mode, so its
// reply and everything else the server sends is held until Pass (or
// another mode) or Cut. Replies to earlier requests that have not reached
// the client yet are held too. It returns a channel that is closed when
// the trap fires. A new call replaces a trap that has not fired yet.
func (p *Proxy) PauseRepliesOnRequest(opcode int32) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pauseOn = &pauseTrap{opcode: opcode, fired: make(chan struct{})}
	return p.pauseOn.fired
}

// Tripped returns a channel that is closed once the trap armed by the
// latest CutOnRequest has fired and its connection is cut. Before any
// CutOnRequest it returns a channel that is never closed.
func (p *Proxy) Tripped() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tripped
}

// Conns returns the number of proxied connections that are open.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops listening, closes every connection and waits until all of
// the proxy's goroutines have returned. Only the first call does anything.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: %w", err)
	}
	return nil
}

// current returns the open connections.
func (p *Proxy) current() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // such as too many open files
			continue
		}
		p.mu.Lock()
		refuse, target := p.refuse || p.closed, p.target
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.connect(c, target)
	}
}

// connect dials target for the accepted client connection c and starts
// forwarding between them.
func (p *Proxy) connect(c net.Conn, target string) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 5 * time.Second}
	s, err := d.DialContext(p.ctx, "tcp", target)
	if err != nil {
		c.Close()
		return
	}
	l := newLink(p, c, s)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.links[l] = true
	p.wg.Add(4)
	p.mu.Unlock()
	go l.readFrames()
	go l.readChunks()
	go l.forward(l.up)
	go l.forward(l.down)
}
