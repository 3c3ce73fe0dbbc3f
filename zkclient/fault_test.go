package zkclient_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The fault tests run the client against a fake server: a TCP listener
// that speaks just enough of the protocol (the handshake, then whatever
// the test's behaviour does) to break it in ways a real server would not.

// fakeZK is the fake server. Each accepted connection's ConnectRequest is
// read and recorded, then the connection is handed to behave with its
// number (0 for the first connection).
type fakeZK struct {
	t      *testing.T
	ln     net.Listener
	behave func(n int, fc *fakeConn)

	mu     sync.Mutex
	hs     []jute.ConnectRequest // every handshake received, in order
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// fakeConn is one connection to the fake server, after the ConnectRequest
// was read.
type fakeConn struct {
	net.Conn
	br   *bufio.Reader
	req  jute.ConnectRequest
	zxid int64
}

const (
	fakeSession = int64(0x7e57_0000_0000_0001)
	fakeGrant   = 10 * time.Second
)

var fakePasswd = []byte("0123456789abcdef")

// startFake starts a fake server; it is closed when the test ends, and the
// test fails if a goroutine is left behind (the client's, or the fake's).
func startFake(t *testing.T, behave func(n int, fc *fakeConn)) *fakeZK {
	t.Helper()
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeZK{t: t, ln: ln, behave: behave}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeZK) addr() string { return f.ln.Addr().String() }

func (f *fakeZK) accept() {
	defer f.wg.Done()
	for n := 0; ; n++ {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			nc.Close()
			return
		}
		f.conns = append(f.conns, nc)
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			defer nc.Close()
			fc := &fakeConn{Conn: nc, br: bufio.NewReader(nc)}
			p, err := jute.ReadFrame(fc.br, 1<<20)
			if err != nil {
				return
			}
			d := jute.NewDecoder(p)
			fc.req.Decode(d)
			if d.Err() != nil {
				f.t.Errorf("fake server: bad ConnectRequest: %v", d.Err())
				return
			}
			f.mu.Lock()
			f.hs = append(f.hs, fc.req)
			f.mu.Unlock()
			f.behave(n, fc)
		}()
	}
}

// handshakes returns the ConnectRequests received so far.
func (f *fakeZK) handshakes() []jute.ConnectRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]jute.ConnectRequest(nil), f.hs...)
}

// close stops the fake: the listener and every connection are closed and
// its goroutines waited for.
func (f *fakeZK) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.mu.Unlock()
	f.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	f.wg.Wait()
}

// grant answers the handshake with a session: the client's own when it
// resumes one, else fakeSession.
func (fc *fakeConn) grant(timeout time.Duration) error {
	id := fc.req.SessionID
	if id == 0 {
		id = fakeSession
	}
	return fc.answer(int32(timeout/time.Millisecond), id, fakePasswd)
}

// answer writes a ConnectResponse.
func (fc *fakeConn) answer(timeoutMs int32, id int64, passwd []byte) error {
	e := jute.NewFrameEncoder()
	resp := jute.ConnectResponse{TimeOut: timeoutMs, SessionID: id, Passwd: passwd}
	resp.Encode(e)
	_, err := fc.Write(e.Frame())
	return err
}

// next reads one request.
func (fc *fakeConn) next() (jute.Request, error) {
	p, err := jute.ReadFrame(fc.br, 4<<20)
	if err != nil {
		return jute.Request{}, err
	}
	return jute.DecodeRequest(p)
}

// nextOp reads requests until one that is not a ping (pings are answered).
func (fc *fakeConn) nextOp() (jute.Request, error) {
	for {
		r, err := fc.next()
		if err != nil || r.Op != jute.OpPing {
			return r, err
		}
		if _, err := fc.Write(fakeFrame(jute.XidPing, 0, 0, nil)); err != nil {
			return r, err
		}
	}
}

// fakeFrame encodes a reply: the header, then body if not nil.
func fakeFrame(xid int32, zxid int64, code int32, body func(e *jute.Encoder)) []byte {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}
	h.Encode(e)
	if body != nil && code == 0 {
		body(e)
	}
	return e.Frame()
}

// fakeData is the data the well-behaved fake answers a getData of path
// with: derived from the path (and, for some paths, long, so that replies
// of many sizes go through the client's read buffer).
func fakeData(path string) []byte {
	n := 0
	for _, b := range []byte(path) {
		n = n*31 + int(b)
	}
	size := len(path) + n%700
	if n%13 == 0 {
		size += 70 << 10
	}
	s := strings.Repeat(path+"|", size/(len(path)+1)+1)
	return []byte(s[:size])
}

// wellFormed returns the reply a plain server would give r; close reports
// that the connection should end after it (closeSession).
func (fc *fakeConn) wellFormed(r jute.Request) (frame []byte, close bool) {
	fc.zxid++
	st := jute.Stat{Czxid: 1, Mzxid: fc.zxid, Version: int32(len(r.Path)), Pzxid: 1}
	switch r.Op {
	case jute.OpPing:
		return fakeFrame(jute.XidPing, 0, 0, nil), false
	case jute.OpAuth:
		return fakeFrame(jute.XidAuth, 0, 0, nil), false
	case jute.OpSetWatches, jute.OpSetWatches2:
		return fakeFrame(jute.XidSetWatches, fc.zxid, 0, nil), false
	case jute.OpCloseSession:
		return fakeFrame(r.Xid, fc.zxid, 0, nil), true
	case jute.OpGetData:
		data := fakeData(r.Path)
		st.DataLength = int32(len(data))
		return fakeFrame(r.Xid, fc.zxid, 0, func(e *jute.Encoder) { e.Buffer(data); st.Encode(e) }), false
	case jute.OpExists, jute.OpSetData:
		return fakeFrame(r.Xid, fc.zxid, 0, func(e *jute.Encoder) { st.Encode(e) }), false
	case jute.OpCreate:
		return fakeFrame(r.Xid, fc.zxid, 0, func(e *jute.Encoder) { e.String(r.Path) }), false
	case jute.OpGetChildren2:
		return fakeFrame(r.Xid, fc.zxid, 0, func(e *jute.Encoder) { e.Strings([]string{}); st.Encode(e) }), false
	}
	return fakeFrame(r.Xid, fc.zxid, 0, nil), false
}

// serveWell answers every request as a plain server would, until the
// connection ends.
func (fc *fakeConn) serveWell() {
	for {
		r, err := fc.next()
		if err != nil {
			return
		}
		frame, end := fc.wellFormed(r)
		if _, err := fc.Write(frame); err != nil || end {
			return
		}
	}
}

// misbehave is a fake's behaviour for a fault on the first bad connections:
// every connection is granted a session with timeout grant, the first bad
// ones (numbered from 0) are then handed to fault, and the later ones are
// served well.
func misbehave(grant time.Duration, bad int, fault func(n int, fc *fakeConn)) func(n int, fc *fakeConn) {
	return func(n int, fc *fakeConn) {
		if fc.grant(grant) != nil {
			return
		}
		if n >= bad {
			fc.serveWell()
			return
		}
		fault(n, fc)
	}
}

// fakeConnect connects a client to the fake with short reconnect and
// close timeouts.
func fakeConnect(t *testing.T, f *fakeZK, opts ...zkclient.Option) *zkclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{f.addr()}, append([]zkclient.Option{
		zkclient.WithSessionTimeout(fakeGrant),
		zkclient.WithCloseTimeout(time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatalf("connect to the fake server: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nextState waits for the next state change, for up to zktest.Bound(d).
func nextState(t *testing.T, s *zkclient.StateStream, d time.Duration) zkclient.StateEvent {
	t.Helper()
	d = zktest.Bound(d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("no state change within %v: %v", d, err)
	}
	return ev
}

// expectState waits for the next state change and requires it to be want.
func expectState(t *testing.T, s *zkclient.StateStream, want zkclient.State, d time.Duration) zkclient.StateEvent {
	t.Helper()
	ev := nextState(t, s, d)
	if ev.State != want {
		t.Fatalf("state %v (%v), want %v", ev.State, ev.Err, want)
	}
	return ev
}

// checkData requires a successful Get of path with the fake's data.
func checkData(t *testing.T, what string, path string, n zkclient.Node, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: get %s: %v", what, path, err)
	}
	if want := fakeData(path); string(n.Data) != string(want) || n.Stat.DataLength != int32(len(want)) || n.Stat.Version != int32(len(path)) {
		t.Fatalf("%s: get %s answered with another reply: %.40q (%d bytes, version %d)", what, path, n.Data, len(n.Data), n.Stat.Version)
	}
}

// (a) The server dies in the middle of a reply frame: the call in flight
// fails with ErrConnectionLoss at once (not after the read timeout), the
// client is Suspended, resumes the session on the next connection, and
// works there.
func TestFaultMidFrameClose(t *testing.T) {
	f := startFake(t, misbehave(fakeGrant, 1, func(_ int, fc *fakeConn) {
		r, err := fc.nextOp()
		if err != nil {
			return
		}
		frame, _ := fc.wellFormed(r)
		fc.Write(frame[:len(frame)/2]) // the length and half the rest
		time.Sleep(20 * time.Millisecond)
		fc.Close()
	}))
	c := fakeConnect(t, f)
	states := c.States()
	defer states.Close()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	t0 := time.Now()
	_, _, err := c.Get(ctx, "/in-flight")
	if !errors.Is(err, zkclient.ErrConnectionLoss) {
		t.Fatalf("get cut mid-frame: %v, want ErrConnectionLoss", err)
	}
	if d := time.Since(t0); d > zktest.Bound(2*time.Second) {
		t.Fatalf("get cut mid-frame failed only after %v", d)
	}
	expectState(t, states, zkclient.StateSuspended, 5*time.Second)
	ev := expectState(t, states, zkclient.StateReconnected, 5*time.Second)
	if ev.Server != f.addr() {
		t.Errorf("reconnected to %q", ev.Server)
	}
	n, err := c.GetAsync("/after").Wait(ctx)
	checkData(t, "after reconnecting", "/after", n, err)
	hs := f.handshakes()
	if len(hs) != 2 || hs[1].SessionID != fakeSession || string(hs[1].Passwd) != string(fakePasswd) {
		t.Fatalf("handshakes %+v: want a second one resuming session %#x", hs, fakeSession)
	}
	if c.SessionID() != fakeSession {
		t.Fatalf("session %#x", c.SessionID())
	}
}

// (b) A reply whose xid is not the oldest request's is a protocol error:
// the connection is dropped and every call in flight fails with
// ErrConnectionLoss; no call gets the reply meant for another.
func TestFaultReplyOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		xid  func(first, second jute.Request) int32
	}{
		{"swapped", func(_, second jute.Request) int32 { return second.Xid }},
		{"unknown", func(first, _ jute.Request) int32 { return first.Xid + 1000 }},
		{"old", func(first, _ jute.Request) int32 { return first.Xid - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, misbehave(fakeGrant, 1, func(_ int, fc *fakeConn) {
				first, err := fc.nextOp()
				if err != nil {
					return
				}
				second, err := fc.nextOp()
				if err != nil {
					return
				}
				// The second request's answer, under the xid tc picks.
				frame, _ := fc.wellFormed(second)
				binary.BigEndian.PutUint32(frame[4:], uint32(tc.xid(first, second)))
				fc.Write(frame)
				// Then the right answers, in order: too late, the
				// client must have dropped the connection.
				f1, _ := fc.wellFormed(first)
				f2, _ := fc.wellFormed(second)
				fc.Write(append(f1, f2...))
				io.Copy(io.Discard, fc.br) // until the client closes
			}))
			c := fakeConnect(t, f)
			states := c.States()
			defer states.Close()
			ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
			defer cancel()
			a, b := c.GetAsync("/a"), c.GetAsync("/b")
			na, errA := a.Wait(ctx)
			nb, errB := b.Wait(ctx)
			if !errors.Is(errA, zkclient.ErrConnectionLoss) || !errors.Is(errB, zkclient.ErrConnectionLoss) {
				t.Fatalf("calls in flight at an out-of-order reply: /a: %.20q %v; /b: %.20q %v; want both ErrConnectionLoss",
					na.Data, errA, nb.Data, errB)
			}
			expectState(t, states, zkclient.StateSuspended, 5*time.Second)
			expectState(t, states, zkclient.StateReconnected, 5*time.Second)
			n, err := c.GetAsync("/c").Wait(ctx)
			checkData(t, "after the protocol error", "/c", n, err)
		})
	}
}

// (c) A reply frame longer than the client's limit drops the connection;
// the client does not allocate what the length claims.
func TestFaultHugeReplyFrame(t *testing.T) {
	lengths := []uint32{1 << 30, 0x7fffffff, 64<<20 + 1, 0xffffffff, 0x80000000, 3}
	f := startFake(t, misbehave(fakeGrant, len(lengths), func(n int, fc *fakeConn) {
		if _, err := fc.nextOp(); err != nil {
			return
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], lengths[n])
		if _, err := fc.Write(hdr[:]); err != nil {
			return
		}
		// Some bytes of the body, then silence until the client hangs
		// up: a client that believed the length would wait for the rest
		// (holding what it allocated) instead of dropping at once.
		fc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		junk := make([]byte, 64<<10)
		for range 32 {
			if _, err := fc.Write(junk); err != nil {
				return
			}
		}
		io.Copy(io.Discard, fc.br)
	}))
	c := fakeConnect(t, f)
	states := c.States()
	defer states.Close()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	for _, n := range lengths {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		_, _, err := c.Get(ctx, "/huge")
		if !errors.Is(err, zkclient.ErrConnectionLoss) {
			t.Fatalf("reply of declared length %#x: %v, want ErrConnectionLoss", n, err)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Fatalf("reply of declared length %#x: %d MiB allocated to refuse it", n, grew>>20)
		}
		if d := time.Since(t0); d > zktest.Bound(2*time.Second) {
			t.Fatalf("reply of declared length %#x: dropped only after %v", n, d)
		}
		expectState(t, states, zkclient.StateSuspended, 5*time.Second)
		expectState(t, states, zkclient.StateReconnected, 5*time.Second)
	}
	n, err := c.GetAsync("/fine").Wait(ctx)
	checkData(t, "after the oversized frames", "/fine", n, err)
}

// (d) A server that never answers the handshake: Connect gives up when
// its context ends, with ErrNoServer.
func TestFaultHandshakeNeverAnswered(t *testing.T) {
	f := startFake(t, func(n int, fc *fakeConn) {
		io.Copy(io.Discard, fc.br) // read, never answer
	})
	for _, tc := range []struct {
		name string
		opts []zkclient.Option
	}{
		{"default connect timeout", nil},
		{"short connect timeout", []zkclient.Option{zkclient.WithConnectTimeout(150 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.handshakes())
			const deadline = 700 * time.Millisecond
			t0 := time.Now()
			ctx, cancel := context.WithDeadline(context.Background(), t0.Add(deadline))
			defer cancel()
			type result struct {
				c   *zkclient.Client
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := zkclient.Connect(ctx, []string{f.addr()}, tc.opts...)
				done <- result{c, err}
			}()
			var c *zkclient.Client
			var err error
			select {
			case r := <-done:
				c, err = r.c, r.err
			case <-time.After(deadline + zktest.Bound(3*time.Second)):
				t.Fatalf("Connect still running %v after a deadline of %v", time.Since(t0), deadline)
			}
			d := time.Since(t0)
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded on a server that never answers")
			}
			if !errors.Is(err, zkclient.ErrNoServer) {
				t.Fatalf("Connect: %v, want ErrNoServer", err)
			}
			if d < deadline {
				t.Fatalf("Connect gave up after %v, before its deadline of %v", d, deadline)
			}
			if slack := zktest.Bound(500 * time.Millisecond); d > deadline+slack {
				t.Fatalf("Connect returned %v after a deadline of %v (allowed: %v more)", d, deadline, slack)
			}
			if got := len(f.handshakes()) - before; got < 1 {
				t.Fatalf("%d handshakes reached the server", got)
			}
		})
	}
}

// (e) A handshake answered with timeout 0 means the server does not know
// the session.
func TestFaultResumeExpired(t *testing.T) {
	f := startFake(t, func(n int, fc *fakeConn) {
		fc.answer(0, 0, make([]byte, 16))
	})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{f.addr()}, zkclient.WithSession(0x1234, fakePasswd))
	if err == nil {
		c.Close()
		t.Fatal("resumed a session the server does not know")
	}
	if !errors.Is(err, zkclient.ErrSessionExpired) {
		t.Fatalf("Connect: %v, want ErrSessionExpired", err)
	}
	time.Sleep(300 * time.Millisecond) // a client that went on would dial again
	hs := f.handshakes()
	if len(hs) != 1 || hs[0].SessionID != 0x1234 || string(hs[0].Passwd) != string(fakePasswd) {
		t.Fatalf("handshakes %+v: want one, resuming 0x1234", hs)
	}
}

// (e) The server expires the session while the client is away: on the
// reconnection's handshake (timeout 0) the client is over: Expired, Done,
// calls fail with ErrSessionExpired, watches end, and no new session is
// opened behind the caller's back.
func TestFaultExpiredOnReconnect(t *testing.T) {
	f := startFake(t, func(n int, fc *fakeConn) {
		if n > 0 {
			fc.answer(0, 0, make([]byte, 16))
			return
		}
		if fc.grant(fakeGrant) != nil {
			return
		}
		for {
			r, err := fc.next()
			if err != nil {
				return
			}
			if r.Op == jute.OpSync { // the test's signal: drop the connection
				return
			}
			frame, _ := fc.wellFormed(r)
			if _, err := fc.Write(frame); err != nil {
				return
			}
		}
	})
	c := fakeConnect(t, f)
	states := c.States()
	defer states.Close()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	_, _, w, err := c.GetW(ctx, "/watched")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx, "/"); !errors.Is(err, zkclient.ErrConnectionLoss) {
		t.Fatalf("sync on a dropped connection: %v", err)
	}
	expectState(t, states, zkclient.StateSuspended, 5*time.Second)
	expectState(t, states, zkclient.StateExpired, 5*time.Second)
	select {
	case <-c.Done():
	case <-time.After(zktest.Bound(time.Second)):
		t.Fatal("Done not closed after the expiry")
	}
	if st := c.State(); st != zkclient.StateExpired {
		t.Fatalf("state %v", st)
	}
	if !errors.Is(c.Err(), zkclient.ErrSessionExpired) {
		t.Fatalf("Err: %v", c.Err())
	}
	if _, _, err := c.Get(ctx, "/x"); !errors.Is(err, zkclient.ErrSessionExpired) {
		t.Fatalf("get after the expiry: %v", err)
	}
	if err := c.WaitConnected(ctx); !errors.Is(err, zkclient.ErrSessionExpired) {
		t.Fatalf("WaitConnected after the expiry: %v", err)
	}
	select {
	case ev := <-w.Event():
		if ev.Type != zkclient.EventNotWatching || !errors.Is(ev.Err, zkclient.ErrSessionExpired) {
			t.Fatalf("watch after the expiry: %+v", ev)
		}
	case <-time.After(zktest.Bound(time.Second)):
		t.Fatal("watch not ended by the expiry")
	}
	time.Sleep(500 * time.Millisecond) // a client that opened a new session would have dialled by now
	hs := f.handshakes()
	for i, h := range hs[1:] {
		if h.SessionID != fakeSession {
			t.Errorf("handshake %d after the expiry asks for session %#x", i+1, h.SessionID)
		}
	}
	if len(hs) != 2 {
		t.Errorf("%d handshakes, want 2 (the session, the refused resumption)", len(hs))
	}
	if c.SessionID() != fakeSession {
		t.Errorf("session id changed to %#x", c.SessionID())
	}
}

// (f) 200 requests pipelined at once, answered in order but in bursts of
// random sizes after random delays, split at random byte boundaries: each
// call gets exactly its own answer.
func TestFaultPipelinedBursts(t *testing.T) {
	const n = 200
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	f := startFake(t, func(_ int, fc *fakeConn) {
		if fc.grant(fakeGrant) != nil {
			return
		}
		reqs := make(chan jute.Request, n+16)
		go func() {
			defer close(reqs)
			for {
				r, err := fc.next()
				if err != nil {
					return
				}
				reqs <- r
			}
		}()
		defer func() {
			fc.Close()
			for range reqs {
			}
		}()
		rng := rand.New(rand.NewPCG(seed, 7))
		for {
			r, ok := <-reqs
			if !ok {
				return
			}
			// A burst: up to want requests, each waited for briefly.
			burst := []jute.Request{r}
		fill:
			for want := 1 + rng.IntN(24); len(burst) < want; {
				select {
				case r, ok := <-reqs:
					if !ok {
						break fill
					}
					burst = append(burst, r)
				case <-time.After(2 * time.Millisecond):
					break fill
				}
			}
			var out []byte
			end := false
			for _, r := range burst {
				frame, e := fc.wellFormed(r)
				out = append(out, frame...)
				end = end || e
			}
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			for len(out) > 0 {
				k := min(len(out), 1+rng.IntN(9000))
				if _, err := fc.Write(out[:k]); err != nil {
					return
				}
				out = out[k:]
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
				}
			}
			if end {
				return
			}
		}
	})
	c := fakeConnect(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(20*time.Second))
	defer cancel()
	calls := make([]*zkclient.Call[zkclient.Node], n)
	for i := range calls {
		calls[i] = c.GetAsync(fmt.Sprintf("/p/%d", i*7919%100003))
	}
	for i, call := range calls {
		path := fmt.Sprintf("/p/%d", i*7919%100003)
		nd, err := call.Wait(ctx)
		checkData(t, fmt.Sprintf("pipelined call %d", i), path, nd, err)
	}
	if len(f.handshakes()) != 1 {
		t.Fatalf("%d connections for one burst of requests", len(f.handshakes()))
	}
}

// (g) A call whose context ends while it is in flight returns ctx's error
// at once; its late answer is consumed, matched to it, and the next
// request gets its own answer on the same connection.
func TestFaultCancelInFlight(t *testing.T) {
	release := make(chan struct{})
	f := startFake(t, misbehave(fakeGrant, 1, func(_ int, fc *fakeConn) {
		slow, err := fc.nextOp()
		if err != nil {
			return
		}
		select {
		case <-release:
		case <-time.After(zktest.Bound(10 * time.Second)):
		}
		frame, _ := fc.wellFormed(slow)
		if _, err := fc.Write(frame); err != nil {
			return
		}
		fc.serveWell()
	}))
	c := fakeConnect(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(5*time.Second))
	defer cancel()
	slow := c.GetAsync("/slow")
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, ccancel)
	t0 := time.Now()
	_, err := slow.Wait(cctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
	if d := time.Since(t0); d > zktest.Bound(time.Second) {
		t.Fatalf("wait returned %v after its context was cancelled at 50ms", d)
	}
	select {
	case <-slow.Done():
		t.Fatal("call done before the server answered")
	default:
	}
	close(release)
	n, err := c.GetAsync("/next").Wait(ctx)
	checkData(t, "the request after the cancelled one", "/next", n, err)
	// The late answer was kept for the cancelled call.
	n, err = slow.Wait(ctx)
	checkData(t, "the cancelled call, waited again", "/slow", n, err)
	if got := len(f.handshakes()); got != 1 || !c.State().Live() {
		t.Fatalf("the late answer cost the connection: %d handshakes, state %v", got, c.State())
	}
}

// (h) Idle, the client pings every third of the negotiated timeout; when
// pings go unanswered it drops the connection after two thirds of it.
//
// The granted timeout scales (zktest.Bound): a process frozen or starved
// for longer than a third of it (the read timeout less the ping interval)
// would rightly lose the connection, so the grant stays well above the
// longest pause the machine may impose: 0.8 s unscaled, 1.6 s under -race.
func TestFaultPings(t *testing.T) {
	grant := zktest.Bound(2400 * time.Millisecond).Truncate(time.Millisecond)
	pings := make(chan time.Time, 1000)
	stopAnswering := make(chan struct{})
	var lastAnswer time.Time // written by the fake before it stops answering
	var lastMu sync.Mutex
	f := startFake(t, misbehave(grant, 1, func(_ int, fc *fakeConn) {
		answering := true
		for {
			r, err := fc.next()
			if err != nil {
				return
			}
			if r.Op == jute.OpPing {
				select {
				case pings <- time.Now():
				default:
				}
				select {
				case <-stopAnswering:
					answering = false
				default:
				}
				if !answering {
					continue
				}
				if r.Xid != jute.XidPing {
					t.Errorf("ping with xid %d", r.Xid)
				}
				if _, err := fc.Write(fakeFrame(jute.XidPing, 0, 0, nil)); err != nil {
					return
				}
				lastMu.Lock()
				lastAnswer = time.Now()
				lastMu.Unlock()
				continue
			}
			frame, end := fc.wellFormed(r)
			if _, err := fc.Write(frame); err != nil || end {
				return
			}
		}
	}))
	c := fakeConnect(t, f, zkclient.WithSessionTimeout(2*grant))
	if c.Timeout() != grant {
		t.Fatalf("negotiated timeout %v, want the %v granted", c.Timeout(), grant)
	}
	states := c.States()
	defer states.Close()
	// Idle for two timeouts: a ping every third of it, so about 6. The
	// promise checked: no silence as long as the read timeout (2/3 of the
	// grant), so the connection never drops while pings are answered, and
	// not more than one ping per 1/6 of the grant (a lower bound: it
	// does not scale beyond the grant itself).
	watch := 2 * grant
	t0 := time.Now()
	var seen []time.Time
	for deadline := time.After(watch); ; {
		select {
		case at := <-pings:
			seen = append(seen, at)
			continue
		case <-deadline:
		}
		break
	}
	if hs := len(f.handshakes()); hs != 1 {
		t.Fatalf("%d connections while pings were answered, want 1", hs)
	}
	if n, most := len(seen), int(watch/(grant/6)); n < 3 || n > most {
		t.Fatalf("%d pings in %v idle with a %v session timeout, want about %d (3 to %d)", n, watch, grant, watch/(grant/3), most)
	}
	prev := t0
	for i, at := range seen {
		if gap := at.Sub(prev); gap > 2*grant/3 {
			t.Fatalf("ping %d came %v after the previous one: the session timeout is %v", i, gap, grant)
		}
		prev = at
	}
	select {
	case <-states.Ready():
		ev, _ := states.Next(context.Background())
		t.Fatalf("state changed while pings were answered: %+v", ev)
	default:
	}
	// Stop answering: the client gives up on the connection after about
	// 2/3 of the timeout since it last heard from the server, not before
	// (a lower bound, unscaled), nor much later.
	close(stopAnswering)
	ev := nextState(t, states, 5*time.Second)
	lastMu.Lock()
	silent := time.Since(lastAnswer)
	lastMu.Unlock()
	if ev.State != zkclient.StateSuspended {
		t.Fatalf("state %v after the pings went unanswered, want suspended", ev.State)
	}
	if silent < grant/2 || silent > 2*grant/3+zktest.Bound(time.Second) {
		t.Fatalf("connection dropped %v after the last answer; want about %v", silent, 2*grant/3)
	}
	expectState(t, states, zkclient.StateReconnected, 5*time.Second)
}
