package zkclient

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// FuzzReply feeds arbitrary frames to the client's reply handling
// (conn.handle, as the reader goroutine calls it) on a connection with a
// request of every kind in flight, a ping, an auth packet, and watches of
// every kind registered. Whatever the server sends, the client must not
// panic, must complete each call exactly once (complete panics on a second
// close), and once the connection fails every call must be done.
//
// The input is a stream of frames, each a 4-byte big-endian length and
// that many bytes (a length past the end takes what is left); the frames
// are handled in order until one is refused, as the reader does. chroot
// runs the same with the client under a chroot.
func FuzzReply(f *testing.F) {
	for _, chroot := range []bool{false, true} {
		sc := newFuzzScenario(f, chroot)
		var all []byte
		// Every pending request answered well, in order, with
		// notifications, the ping and the auth between them.
		for i, cl := range sc.pending() {
			all = append(all, sc.validReply(cl)...)
			if i == 2 {
				all = append(all, reply(jute.XidPing, 0, 0, nil)...)
				all = append(all, reply(jute.XidAuth, 0, 0, nil)...)
				all = append(all, reply(jute.XidSetWatches, 0, 0, nil)...)
			}
			if i%4 == 0 {
				all = append(all, sc.notifications()[i%len(sc.notifications())]...)
			}
		}
		f.Add(chroot, all)
		// For each op: the replies before it, then its own reply, valid
		// or an error (the fuzzer then mutates one body at a time).
		var prefix []byte
		for _, cl := range sc.pending() {
			f.Add(chroot, append(append([]byte(nil), prefix...), sc.validReply(cl)...))
			f.Add(chroot, append(append([]byte(nil), prefix...), reply(cl.xid, 7, jute.ErrNoNode, nil)...))
			prefix = append(prefix, sc.validReply(cl)...)
		}
		first := sc.pending()[0].xid
		for _, n := range sc.notifications() {
			f.Add(chroot, n)
		}
		f.Add(chroot, reply(jute.XidAuth, 0, jute.ErrAuthFailed, nil))
		f.Add(chroot, reply(first, 9, jute.ErrSessionExpired, nil))
		f.Add(chroot, reply(first+1, 9, 0, nil)) // out of order
		f.Add(chroot, reply(jute.XidPing, 0, 0, nil))
		f.Add(chroot, append(reply(jute.XidPing, 0, 0, nil), reply(jute.XidPing, 0, 0, nil)...))
		sc.end()
	}
	f.Fuzz(func(t *testing.T, chroot bool, stream []byte) {
		sc := newFuzzScenario(t, chroot)
		defer sc.end()
		for len(stream) >= 4 {
			n := int(binary.BigEndian.Uint32(stream))
			stream = stream[4:]
			if n < 0 || n > len(stream) {
				n = len(stream)
			}
			frame := stream[:n:n]
			stream = stream[n:]
			if err := sc.cn.handle(frame); err != nil {
				sc.cn.fail(err)
				break
			}
		}
	})
}

// fuzzScenario is a Client with one connection (to no server: nothing is
// written) and a request of every kind queued on it.
type fuzzScenario struct {
	tb    testing.TB
	c     *Client
	cn    *conn
	calls []interface{ Done() <-chan struct{} }
}

// fuzzNetConn stands for the socket: only Close may be called.
type fuzzNetConn struct{ net.Conn }

func (fuzzNetConn) Close() error { return nil }

func newFuzzScenario(tb testing.TB, chroot bool) *fuzzScenario {
	c := &Client{
		cfg:     defaultConfig(),
		servers: []string{"fuzz:2181"},
		log:     slog.New(slog.DiscardHandler),
		epoch:   time.Now(),
		state:   StateConnected,
		id:      0x5e5510,
		passwd:  make([]byte, 16),
		timeout: 10 * time.Second,
		server:  "fuzz:2181",
		up:      make(chan struct{}),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if chroot {
		c.chroot = "/app"
	}
	c.watches.init(c)
	cn := &conn{
		c:           c,
		nc:          fuzzNetConn{},
		addr:        "fuzz:2181",
		readTimeout: time.Second,
		pingEvery:   time.Second,
		wake:        make(chan struct{}, 1),
		gone:        make(chan struct{}),
	}
	c.cn = cn
	close(c.up)
	sc := &fuzzScenario{tb: tb, c: c, cn: cn}

	// Watches of every kind, registered the way a reply registers them.
	acl := WorldACL(PermAll)
	setup := func(call interface{ Done() <-chan struct{} }) {
		cn.mu.Lock()
		cl := cn.pending[len(cn.pending)-1]
		cn.mu.Unlock()
		if err := cn.handle(sc.validReply(cl)[4:]); err != nil {
			tb.Fatalf("setup reply to op %d: %v", cl.op, err)
		}
		<-call.Done()
	}
	for _, p := range []string{"/w", "/w/kid", "/r/x"} {
		call, _ := startWatch(c, "get", p, &jute.Request{Op: jute.OpGetData, Path: c.toServer(p)}, decodeNode, kindData, false)
		setup(call)
		call, _ = startWatch(c, "get", p, &jute.Request{Op: jute.OpGetData, Path: c.toServer(p)}, decodeNode, kindData, false)
		setup(call)
		lc, _ := startWatch(c, "children", p, &jute.Request{Op: jute.OpGetChildren2, Path: c.toServer(p)}, decodeListing, kindChild, false)
		setup(lc)
	}
	ec, _ := startWatch(c, "exists", "/missing", &jute.Request{Op: jute.OpExists, Path: c.toServer("/missing")}, decodeStat, kindData, true)
	cn.mu.Lock()
	ecl := cn.pending[len(cn.pending)-1]
	cn.mu.Unlock()
	if err := cn.handle(reply(ecl.xid, 1, jute.ErrNoNode, nil)[4:]); err != nil {
		tb.Fatal(err)
	}
	<-ec.Done()
	// Persistent and recursive watches: AddWatch waits, so it runs aside
	// while its reply is handled here.
	bgDone := make(chan struct{}, 4)
	addWatch := func(p string, recursive bool) {
		cn.mu.Lock()
		before := len(cn.pending)
		cn.mu.Unlock()
		go func() {
			if _, err := c.AddWatch(context.Background(), p, recursive); err != nil {
				tb.Errorf("setup addWatch %s: %v", p, err)
			}
			bgDone <- struct{}{}
		}()
		for {
			cn.mu.Lock()
			n := len(cn.pending)
			var cl *call
			if n > before {
				cl = cn.pending[n-1]
			}
			cn.mu.Unlock()
			if cl != nil {
				if err := cn.handle(reply(cl.xid, 1, 0, nil)[4:]); err != nil {
					tb.Fatal(err)
				}
				break
			}
			runtime.Gosched()
		}
		<-bgDone
	}
	addWatch("/w", false)
	addWatch("/r", true)
	addWatch("/", true)

	// A request of every kind in flight, in this order.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	add := func(call interface{ Done() <-chan struct{} }) { sc.calls = append(sc.calls, call) }
	add(c.CreateAsync("/n", []byte("d"), Persistent, acl))
	add(c.Create2Async("/n", nil, EphemeralSequential, acl))
	add(c.CreateAsync("/ctr", nil, Container, acl))
	add(c.CreateTTLAsync("/ttl", nil, PersistentWithTTL, acl, time.Minute))
	add(c.DeleteAsync("/n", 3))
	add(c.ExistsAsync("/n"))
	add(c.GetAsync("/n"))
	add(c.SetAsync("/n", []byte("x"), -1))
	add(c.ChildrenAsync("/n"))
	gw, _ := startWatch(c, "get", "/g", &jute.Request{Op: jute.OpGetData, Path: c.toServer("/g")}, decodeNode, kindData, false)
	add(gw)
	ew, _ := startWatch(c, "exists", "/e", &jute.Request{Op: jute.OpExists, Path: c.toServer("/e")}, decodeStat, kindData, true)
	add(ew)
	cw, _ := startWatch(c, "children", "/c", &jute.Request{Op: jute.OpGetChildren2, Path: c.toServer("/c")}, decodeListing, kindChild, false)
	add(cw)
	add(c.MultiAsync(c.CreateOp("/m", nil, PersistentSequential, acl), c.SetOp("/m", nil, 1), c.DeleteOp("/m", -1), c.CheckOp("/m", 2)))
	// The synchronous calls, with a context already over: each is sent,
	// then the caller stops waiting and the request stays in flight.
	c.GetACL(cancelled, "/n")
	c.SetACL(cancelled, "/n", acl, 0)
	c.Sync(cancelled, "/n")
	c.AllChildrenNumber(cancelled, "/")
	c.Ephemerals(cancelled, "/")
	c.WhoAmI(cancelled)
	c.CheckWatches(cancelled, "/w", WatcherAny)
	c.MultiRead(cancelled, c.GetOp("/n"), c.ChildrenOp("/n"), c.GetOp("/none"))
	c.GetW(cancelled, "/abandoned")
	c.AddWatch(cancelled, "/pa", false)
	cn.enqueue(&jute.Request{Op: jute.OpPing}, nil, nil)
	cn.sendAuth(authInfo{"digest", []byte("u:p")})
	cl := c.newCall(opCloseSession, "")
	cn.enqueue(&jute.Request{Op: jute.OpCloseSession}, cl, nil)
	return sc
}

// pending returns the calls in flight, oldest first.
func (sc *fuzzScenario) pending() []*call {
	sc.cn.mu.Lock()
	defer sc.cn.mu.Unlock()
	return append([]*call(nil), sc.cn.pending...)
}

// end fails the connection and the session, then requires every call to
// be done.
func (sc *fuzzScenario) end() {
	sc.cn.fail(errors.New("fuzz: end of input"))
	sc.c.finish(StateClosed, ErrClosed)
	for _, cl := range sc.pending() {
		sc.tb.Errorf("op %d (xid %d) still pending after the connection failed", cl.op, cl.xid)
	}
	for i, call := range sc.calls {
		select {
		case <-call.Done():
		default:
			sc.tb.Errorf("call %d not done after the connection failed", i)
		}
	}
}

// notifications returns watch notifications of every type on watched
// paths (and some on paths nothing watches), as frames.
func (sc *fuzzScenario) notifications() [][]byte {
	var out [][]byte
	for _, p := range []string{"/w", "/w/kid", "/r/x", "/r/x/y", "/missing", "/", "/other"} {
		for _, typ := range []int32{jute.EventNodeCreated, jute.EventNodeDeleted, jute.EventNodeDataChanged, jute.EventNodeChildrenChanged, jute.EventPersistentWatchRemoved} {
			ev := jute.WatcherEvent{Type: typ, State: jute.StateSyncConnected, Path: sc.c.toServer(p)}
			out = append(out, reply(jute.XidNotification, 0, 0, func(e *jute.Encoder) { ev.Encode(e) }))
		}
	}
	return out
}

// reply encodes a reply frame (with its length).
func reply(xid int32, zxid int64, code int32, body func(e *jute.Encoder)) []byte {
	e := jute.NewFrameEncoder()
	h := jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}
	h.Encode(e)
	if body != nil {
		body(e)
	}
	return e.Frame()
}

// validReply returns the frame a server would answer cl with.
func (sc *fuzzScenario) validReply(cl *call) []byte {
	st := jute.Stat{Czxid: 3, Mzxid: 4, Version: 1, Cversion: 2, DataLength: 1, NumChildren: 2, Pzxid: 5}
	path := sc.c.toServer("/n")
	var body func(e *jute.Encoder)
	switch cl.op {
	case jute.OpCreate:
		body = func(e *jute.Encoder) { e.String(path) }
	case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		body = func(e *jute.Encoder) { e.String(path + "0000000001"); st.Encode(e) }
	case jute.OpExists, jute.OpSetData, jute.OpSetACL:
		body = func(e *jute.Encoder) { st.Encode(e) }
	case jute.OpGetData:
		body = func(e *jute.Encoder) { e.Buffer([]byte("d")); st.Encode(e) }
	case jute.OpGetChildren2:
		body = func(e *jute.Encoder) { e.Strings([]string{"a", "b"}); st.Encode(e) }
	case jute.OpGetACL:
		body = func(e *jute.Encoder) {
			jute.EncodeACLs(e, []jute.ACL{{Perms: 31, ID: jute.ID{Scheme: "world", ID: "anyone"}}})
			st.Encode(e)
		}
	case jute.OpGetAllChildrenNumber:
		body = func(e *jute.Encoder) { e.Int32(12) }
	case jute.OpGetEphemerals:
		body = func(e *jute.Encoder) { e.Strings([]string{path, sc.c.toServer("/e")}) }
	case jute.OpWhoAmI:
		body = func(e *jute.Encoder) { e.Int32(1); e.String("ip"); e.String("127.0.0.1") }
	case jute.OpMulti:
		body = func(e *jute.Encoder) {
			(&jute.MultiHeader{Type: jute.OpCreate, Err: 0}).Encode(e)
			e.String(path + "0000000002")
			(&jute.MultiHeader{Type: jute.OpSetData, Err: 0}).Encode(e)
			st.Encode(e)
			(&jute.MultiHeader{Type: jute.OpDelete, Err: 0}).Encode(e)
			(&jute.MultiHeader{Type: jute.OpCheck, Err: 0}).Encode(e)
			(&jute.MultiHeader{Type: jute.OpError, Err: jute.ErrBadVersion}).Encode(e)
			e.Int32(jute.ErrBadVersion)
			(&jute.MultiHeader{Type: -1, Done: true, Err: -1}).Encode(e)
		}
	case jute.OpMultiRead:
		body = func(e *jute.Encoder) {
			(&jute.MultiHeader{Type: jute.OpGetData, Err: 0}).Encode(e)
			e.Buffer(nil)
			st.Encode(e)
			(&jute.MultiHeader{Type: jute.OpGetChildren, Err: 0}).Encode(e)
			e.Strings([]string{"k"})
			(&jute.MultiHeader{Type: jute.OpError, Err: jute.ErrNoNode}).Encode(e)
			e.Int32(jute.ErrNoNode)
			(&jute.MultiHeader{Type: -1, Done: true, Err: -1}).Encode(e)
		}
	}
	return reply(cl.xid, 10+int64(cl.xid), 0, body)
}
