package zkserver_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// rawClient is a minimal ZooKeeper client on the jute codec, for opcodes
// go-zookeeper/zk does not expose and for exact frame-by-frame checks.
type rawClient struct {
	t       testing.TB
	nc      net.Conn
	xid     int32
	id      int64
	passwd  []byte
	timeout int32
	frames  []frame // every frame received, in order
}

// frame is one frame a raw client received: a reply or a notification.
type frame struct {
	hdr   jute.ReplyHeader
	body  []byte
	event *jute.WatcherEvent
}

func dialRaw(t testing.TB, addr string, id int64, passwd []byte, readOnly bool) (*rawClient, jute.ConnectResponse, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawClient{t: t, nc: nc}
	t.Cleanup(func() { nc.Close() })
	if passwd == nil {
		passwd = make([]byte, 16)
	}
	req := jute.ConnectRequest{TimeOut: 4000, SessionID: id, Passwd: passwd, HasReadOnly: readOnly}
	e := jute.NewFrameEncoder()
	req.Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	c.id, c.passwd, c.timeout = resp.SessionID, resp.Passwd, resp.TimeOut
	return c, resp, nil
}

func newRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, resp, err := dialRaw(t, addr, 0, nil, false)
	if err != nil {
		t.Fatalf("raw connect: %v", err)
	}
	if resp.SessionID == 0 {
		t.Fatalf("raw connect: refused")
	}
	return c
}

// send writes a request with the next xid (or r.Xid if set) and returns
// the xid.
func (c *rawClient) send(r jute.Request) int32 {
	if r.Xid == 0 {
		c.xid++
		r.Xid = c.xid
	}
	e := jute.NewFrameEncoder()
	r.Encode(e)
	if _, err := c.nc.Write(e.Frame()); err != nil {
		c.t.Fatalf("raw send: %v", err)
	}
	return r.Xid
}

// readFrame reads the next frame.
func (c *rawClient) readFrame() (frame, error) {
	p, err := jute.ReadFrame(c.nc, 1<<20)
	if err != nil {
		return frame{}, err
	}
	d := jute.NewDecoder(p)
	var f frame
	f.hdr.Decode(d)
	f.body = d.Rest()
	if f.hdr.Xid == jute.XidNotification {
		f.event = &jute.WatcherEvent{}
		f.event.Decode(d)
	}
	c.frames = append(c.frames, f)
	return f, d.Err()
}

// call sends r and reads frames up to its reply, which it returns.
func (c *rawClient) call(r jute.Request) frame {
	c.t.Helper()
	xid := c.send(r)
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("raw call op %d: %v", r.Op, err)
		}
		if f.hdr.Xid == xid {
			return f
		}
	}
}

// waitEvents reads frames until n notifications arrived since the last
// call to take.
func (c *rawClient) events(n int) []jute.WatcherEvent {
	c.t.Helper()
	var out []jute.WatcherEvent
	for _, f := range c.frames {
		if f.event != nil {
			out = append(out, *f.event)
		}
	}
	for len(out) < n {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("raw events: have %v, want %d: %v", out, n, err)
		}
		if f.event != nil {
			out = append(out, *f.event)
		}
	}
	return out
}

func (e frame) String() string {
	if e.event != nil {
		return fmt.Sprintf("event(%d %s)", e.event.Type, e.event.Path)
	}
	return fmt.Sprintf("reply(xid=%d err=%d)", e.hdr.Xid, e.hdr.Err)
}

func dialRawTimeout(t testing.TB, addr string, ms int32) (*rawClient, jute.ConnectResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	req := jute.ConnectRequest{TimeOut: ms, Passwd: make([]byte, 16)}
	e := jute.NewFrameEncoder()
	req.Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	return &rawClient{t: t, nc: nc, id: resp.SessionID}, resp, nil
}

// zkConnect connects go-zookeeper/zk to addr and records its session
// events.
func zkConnect(t *testing.T, addr string) (*zk.Conn, *stateLog) {
	t.Helper()
	log := &stateLog{}
	c, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false),
		zk.WithLogger(quiet{}), zk.WithEventCallback(log.add))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if !log.wait(zk.StateHasSession, 10*time.Second) {
		t.Fatal("no session")
	}
	return c, log
}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// stateLog records the session states go-zookeeper reports.
type stateLog struct {
	mu     sync.Mutex
	states []zk.State
}

func (l *stateLog) add(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	l.mu.Lock()
	l.states = append(l.states, ev.State)
	l.mu.Unlock()
}

// wait waits until state s has been reported after the last wait.
func (l *stateLog) wait(s zk.State, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for i, x := range l.states {
			if x == s {
				l.states = l.states[i+1:]
				l.mu.Unlock()
				return true
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func recvEvent(t *testing.T, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
		return zk.Event{}
	}
}
