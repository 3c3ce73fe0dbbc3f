package zkserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestConformanceCRUD(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.session(a.id, "A")
		p := tg.path
		r.do(a, "A", create(p, "root", 0))
		r.do(a, "A", create2(p+"/x", "hello", 0))
		r.do(a, "A", create(p+"/x", "again", 0))                                    // NodeExists
		r.do(a, "A", create(p+"/missing/x", "", 0))                                 // NoNode
		r.do(a, "A", create(p+"/bad/", "", 0))                                      // BadArguments
		r.do(a, "A", create(p+"/y", "", 9))                                         // bad flags
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/noacl", Flags: 0}) // InvalidACL
		r.do(a, "A", getData(p+"/x", false))
		r.do(a, "A", setData(p+"/x", "v1", 0))
		r.do(a, "A", setData(p+"/x", "v2", 0)) // BadVersion
		r.do(a, "A", setData(p+"/x", "v2", -1))
		r.do(a, "A", setData(p+"/nope", "v2", -1))
		r.do(a, "A", exists(p+"/x", false))
		r.do(a, "A", exists(p+"/nope", false))
		r.do(a, "A", children(p, false))
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: p})
		r.do(a, "A", del(p, -1))     // NotEmpty
		r.do(a, "A", del(p+"/x", 7)) // BadVersion
		r.do(a, "A", del(p+"/x", 2))
		r.do(a, "A", del(p+"/x", -1))    // NoNode
		r.do(a, "A", children(p, false)) // cversion 2 after create+delete
		r.do(a, "A", jute.Request{Op: jute.OpSync, Path: p})
		r.do(a, "A", getData(p, false))
		r.do(a, "A", del(p, -1))
	})
}

func TestConformanceSystemNodes(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: "/zookeeper"})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: "/zookeeper/config"})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: "/zookeeper"})
		r.do(a, "A", getData("/zookeeper/config", false))
		r.do(a, "A", getData("/zookeeper/quota", false))
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: "/zookeeper"})
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: "/nonexistent"})
	})
}

func TestConformanceSequential(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.session(a.id, "A")
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", create(p+"/s-", "", 2))
		r.do(a, "A", create(p+"/s-", "", 3))
		r.do(a, "A", create(p+"/plain", "", 0))
		r.do(a, "A", del(p+"/s-0000000000", -1))
		r.do(a, "A", children(p, false))
		r.do(a, "A", create(p+"/s-", "", 2))
		r.do(a, "A", children(p, false))
		r.do(a, "A", multi(del(p+"/plain", -1), create(p+"/s-", "", 2), del(p+"/s-0000000001", -1), create(p+"/s-", "", 2)))
		r.do(a, "A", children(p, false))
		r.do(a, "A", create(p+"/", "", 2)) // name is only the suffix
		r.do(a, "A", create(p+"/s-", "", 2))
		r.do(a, "A", create(p+"/s-0000000009", "", 0))
		r.do(a, "A", create(p+"/s-", "", 2)) // NodeExists
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: p})
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p})
	})
}

func TestConformanceEphemerals(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		r.session(a.id, "A")
		r.session(b.id, "B")
		p := tg.path
		r.do(b, "B", create(p, "", 0))
		r.do(a, "A", create2(p+"/e", "", 1))
		r.do(a, "A", create(p+"/e/child", "", 0)) // NoChildrenForEphemerals
		r.do(a, "A", create(p+"/q-", "", 3))
		r.do(a, "A", jute.Request{Op: jute.OpGetEphemerals, Path: p})
		r.do(a, "A", jute.Request{Op: jute.OpGetEphemerals, Path: p + "/q"})
		r.do(b, "B", jute.Request{Op: jute.OpGetEphemerals, Path: "/"})
		r.do(b, "B", exists(p+"/e", true))
		r.do(b, "B", children(p, true))
		r.do(a, "A", jute.Request{Op: jute.OpCloseSession})
		// ZooKeeper deletes a session's ephemerals in hash-set order.
		r.expectEventsUnordered(b, "B", 2)
		r.do(b, "B", children(p, false))

		// Expiry through the protocol (zktest.ExpireSession) on both.
		c := newRaw(t, tg.addr)
		r.session(c.id, "C")
		r.do(c, "C", create(p+"/c", "", 1))
		r.do(b, "B", getData(p+"/c", true))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := zktest.ExpireSession(ctx, tg.addr, c.id, c.passwd); err != nil {
			t.Fatal(err)
		}
		r.expectEvents(b, "B", 1)
		r.do(b, "B", exists(p+"/c", false))
		// The expired session is refused.
		_, resp, err := dialRaw(t, tg.addr, c.id, c.passwd, true)
		if err != nil {
			t.Fatal(err)
		}
		r.logf("reconnect expired: timeout=%d id=%d passwd=%x readOnly=%v/%v",
			resp.TimeOut, resp.SessionID, resp.Passwd, resp.HasReadOnly, resp.ReadOnly)
	})
}

func TestConformanceWatches(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		// B watches a missing node twice (one watch), the parent's children.
		r.do(b, "B", exists(p+"/w", true))
		r.do(b, "B", exists(p+"/w", true))
		r.do(b, "B", children(p, true))
		r.do(a, "A", create(p+"/w", "", 0))
		r.expectEvents(b, "B", 2)
		// A watches its own node: the event precedes A's reply.
		r.do(a, "A", getData(p+"/w", true))
		r.do(a, "A", exists(p+"/w", true))
		r.do(b, "B", getData(p+"/w", true))
		r.do(a, "A", setData(p+"/w", "1", -1))
		r.do(a, "A", setData(p+"/w", "2", -1)) // one-shot: no second event
		r.expectEvents(b, "B", 1)
		// Delete: data and child watchers of the node, then the parent.
		r.do(b, "B", getData(p+"/w", true))
		r.do(b, "B", children(p+"/w", true))
		r.do(b, "B", children(p, true))
		r.do(a, "A", del(p+"/w", -1))
		r.expectEvents(b, "B", 2)
		// checkWatches / removeWatches.
		r.do(b, "B", exists(p+"/z", true))
		r.do(b, "B", jute.Request{Op: jute.OpCheckWatches, Path: p + "/z", Mode: jute.WatcherData})
		r.do(b, "B", jute.Request{Op: jute.OpCheckWatches, Path: p + "/z", Mode: jute.WatcherChildren})
		r.do(b, "B", jute.Request{Op: jute.OpRemoveWatches, Path: p + "/z", Mode: jute.WatcherAny})
		r.do(b, "B", jute.Request{Op: jute.OpRemoveWatches, Path: p + "/z", Mode: jute.WatcherAny})
		r.do(a, "A", create(p+"/z", "", 0)) // nobody watches any more
		r.do(b, "B", exists(p+"/z", false))
	})
}

func TestConformancePersistentWatches(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(b, "B", jute.Request{Op: jute.OpAddWatch, Path: p, Mode: jute.AddWatchPersistent})
		r.do(b, "B", jute.Request{Op: jute.OpAddWatch, Path: p + "/r", Mode: jute.AddWatchPersistentRecursive})
		r.do(a, "A", create(p+"/r", "", 0))
		r.do(a, "A", create(p+"/r/x", "", 0))
		r.do(a, "A", create(p+"/r/x/y", "", 0))
		r.do(a, "A", setData(p+"/r/x", "d", -1))
		r.do(a, "A", setData(p, "d", -1))
		r.do(a, "A", setData(p, "e", -1))
		r.do(a, "A", del(p+"/r/x/y", -1))
		r.expectEvents(b, "B", 8)
		r.do(b, "B", jute.Request{Op: jute.OpCheckWatches, Path: p, Mode: jute.WatcherAny})
		r.do(b, "B", jute.Request{Op: jute.OpRemoveWatches, Path: p + "/r", Mode: jute.WatcherAny})
		r.do(a, "A", setData(p+"/r/x", "f", -1))
		r.do(b, "B", jute.Request{Op: jute.OpSync, Path: p})
		// A standard watch set on a persistently watched path.
		r.do(b, "B", getData(p, true))
		r.do(a, "A", setData(p, "g", -1))
		r.do(a, "A", setData(p, "h", -1))
		r.do(b, "B", jute.Request{Op: jute.OpSync, Path: p})
		r.do(b, "B", jute.Request{Op: jute.OpCheckWatches, Path: p, Mode: jute.WatcherData})
		r.do(b, "B", jute.Request{Op: jute.OpCheckWatches, Path: p, Mode: jute.WatcherChildren})
	})
}

func TestConformanceSetWatches(t *testing.T) {
	for _, op := range []int32{jute.OpSetWatches, jute.OpSetWatches2} {
		t.Run(opLabel(op), func(t *testing.T) {
			conform(t, func(t *testing.T, tg target, r *rec) {
				a := newRaw(t, tg.addr)
				b := newRaw(t, tg.addr)
				p := tg.path
				r.do(a, "A", create(p, "", 0))
				r.do(a, "A", create(p+"/same", "", 0))
				r.do(a, "A", create(p+"/changed", "", 0))
				r.do(a, "A", create(p+"/gone", "", 0))
				base := r.do(a, "A", create(p+"/kids", "", 0)).hdr.Zxid
				r.do(a, "A", setData(p+"/changed", "x", -1))
				r.do(a, "A", del(p+"/gone", -1))
				r.do(a, "A", create(p+"/born", "", 0))
				r.do(a, "A", create(p+"/kids/k", "", 0))
				sw := jute.Request{Op: op, Xid: jute.XidSetWatches, RelativeZxid: base,
					DataWatches:  []string{p + "/same", p + "/changed", p + "/gone"},
					ExistWatches: []string{p + "/born", p + "/unborn"},
					ChildWatches: []string{p + "/kids", p + "/same", p + "/gone"},
				}
				if op == jute.OpSetWatches2 {
					sw.PersistWatches = []string{p + "/same"}
				}
				r.do(b, "B", sw)
				r.do(a, "A", setData(p+"/same", "y", -1))
				r.do(a, "A", create(p+"/unborn", "", 0))
				r.do(a, "A", create(p+"/same/c", "", 0))
				n := 2
				if op == jute.OpSetWatches2 {
					n = 3
				}
				r.expectEvents(b, "B", n)
			})
		})
	}
}

func opLabel(op int32) string {
	if op == jute.OpSetWatches {
		return "v1"
	}
	return "v2"
}

func TestConformanceMulti(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		r.session(a.id, "A")
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(b, "B", children(p, true))
		r.do(a, "A", multi(
			create(p+"/m1", "a", 0),
			create2(p+"/m2-", "b", 3),
			jute.Request{Op: jute.OpCreateContainer, Path: p + "/box", ACL: open, Flags: 4},
			setData(p+"/m1", "c", 0),
			check(p+"/m1", 1),
			del(p+"/m1", -1),
		))
		r.expectEvents(b, "B", 1)
		r.do(b, "B", children(p, true))
		r.do(a, "A", multi(
			create(p+"/n1", "", 0),
			check(p+"/box", 5),
			create(p+"/n2", "", 0),
		))
		r.do(a, "A", multi(
			create(p+"/n1", "", 0),
			create(p+"/n1", "", 0),
		))
		r.do(a, "A", multi())
		r.do(a, "A", children(p, false))
		r.do(a, "A", jute.Request{Op: jute.OpMultiRead, Ops: []jute.Request{
			{Op: jute.OpGetChildren, Path: p},
			{Op: jute.OpGetData, Path: p + "/nope"},
			{Op: jute.OpGetData, Path: p + "/box"},
		}})
		r.do(a, "A", create(p+"/n1", "", 0)) // B's child watch fires now
		r.expectEvents(b, "B", 1)
	})
}

func TestConformanceACL(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.do(a, "A", jute.Request{Op: jute.OpAuth, Xid: 77, Scheme: "digest", Auth: []byte("alice:secret")})
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.do(a, "A", create(p, "", 0))
		authACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth", ID: ""}}}
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/mine", Data: []byte("s"), ACL: authACL})
		r.do(b, "B", jute.Request{Op: jute.OpCreate, Path: p + "/b", ACL: authACL}) // InvalidACL
		r.do(b, "B", getData(p+"/mine", false))
		r.do(b, "B", exists(p+"/mine", false))
		r.do(b, "B", setData(p+"/mine", "x", -1))
		r.do(b, "B", create(p+"/mine/c", "", 0))
		r.do(b, "B", jute.Request{Op: jute.OpGetACL, Path: p + "/mine"})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/mine"})
		readOnly := []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}},
			{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "alice:" + "x"}}}
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/ro", ACL: readOnly})
		r.do(b, "B", jute.Request{Op: jute.OpGetACL, Path: p + "/ro"})
		r.do(b, "B", setData(p+"/ro", "x", -1))
		ipACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "ip", ID: "127.0.0.0/8"}}}
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/ip", ACL: ipACL})
		r.do(b, "B", getData(p+"/ip", false))
		r.do(a, "A", jute.Request{Op: jute.OpSetACL, Path: p + "/ip", ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "ip", ID: "10.0.0.1"}}}, Version: 0})
		r.do(b, "B", getData(p+"/ip", false))
		r.do(a, "A", jute.Request{Op: jute.OpSetACL, Path: p + "/ip", ACL: open, Version: 0}) // BadVersion
		r.do(a, "A", jute.Request{Op: jute.OpSetACL, Path: p + "/ip", ACL: []jute.ACL{{Perms: 31, ID: jute.ID{Scheme: "bogus", ID: "x"}}}, Version: -1})
		r.do(a, "A", jute.Request{Op: jute.OpDelete, Path: p + "/mine", Version: -1})
		// An unknown scheme fails authentication and ends the connection.
		c := newRaw(t, tg.addr)
		f := c.call(jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "nosuch", Auth: []byte("x")})
		r.logf("auth nosuch: err=%d", f.hdr.Err)
		_, err := c.readFrame()
		r.logf("after AuthFailed: closed=%v", err != nil)
	})
}

func TestConformanceMiscOps(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", jute.Request{Op: jute.OpCreateTTL, Path: p + "/ttl", ACL: open, Flags: 5, TTL: 1000})
		r.do(a, "A", jute.Request{Op: jute.OpCreateContainer, Path: p + "/box", ACL: open, Flags: 4})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/box2", ACL: open, Flags: 4})
		r.do(a, "A", jute.Request{Op: jute.OpCreate2, Path: p + "/box3", ACL: open, Flags: 4})
		r.do(a, "A", exists(p+"/box2", false))
		r.do(a, "A", jute.Request{Op: jute.OpReconfig, Members: "server.1=127.0.0.1:1:2"})
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p})
		r.do(a, "A", jute.Request{Op: jute.OpPing, Xid: jute.XidPing})
		r.do(a, "A", getData(p, false))
		// An unknown opcode gets Unimplemented and the connection closes;
		// so does a check outside a multi.
		b := newRaw(t, tg.addr)
		f := b.call(jute.Request{Op: 99})
		r.logf("op 99: err=%d zxid=%d", f.hdr.Err, f.hdr.Zxid)
		_, err := b.readFrame()
		r.logf("op 99: closed=%v", err != nil)
		// ZooKeeper never answers a check outside a multi (the session
		// times out); zkserver closes the connection.
		c := newRaw(t, tg.addr)
		c.send(check(p, 0))
		c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.readFrame()
		r.logf("check: answered=%v", err == nil)
	})
}

func TestConformanceHandshake(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		for _, ro := range []bool{false, true} {
			_, resp, err := dialRaw(t, tg.addr, 0, nil, ro)
			if err != nil {
				t.Fatal(err)
			}
			r.logf("new session readOnly=%v: timeout=%d passwdLen=%d hasRO=%v", ro, resp.TimeOut, len(resp.Passwd), resp.HasReadOnly)
		}
		for _, ms := range []int32{1, 199, 200, 4567, 60000, 999999} {
			c, err := dialTimeout(t, tg.addr, ms)
			if err != nil {
				t.Fatal(err)
			}
			r.logf("asked %d got %d", ms, c)
		}
		a := newRaw(t, tg.addr)
		// Wrong password: refused.
		_, resp, err := dialRaw(t, tg.addr, a.id, make([]byte, 16), false)
		if err != nil {
			t.Fatal(err)
		}
		r.logf("wrong password: timeout=%d id=%d passwd=%x", resp.TimeOut, resp.SessionID, resp.Passwd)
		// Right password: the same session, the old connection is closed.
		b, resp, err := dialRaw(t, tg.addr, a.id, a.passwd, false)
		if err != nil {
			t.Fatal(err)
		}
		r.logf("right password: same=%v", resp.SessionID == a.id)
		_, err = a.readFrame()
		r.logf("old connection closed: %v", err != nil)
		r.do(b, "B", exists("/zookeeper", false))
	})
}

func dialTimeout(t *testing.T, addr string, ms int32) (int32, error) {
	c, resp, err := dialRawTimeout(t, addr, ms)
	if err != nil {
		return 0, err
	}
	c.call(jute.Request{Op: jute.OpCloseSession})
	return resp.TimeOut, nil
}

func TestConformanceFrames(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		for _, tc := range []struct {
			name  string
			frame []byte
		}{
			{"negative length", []byte{0xff, 0xff, 0xff, 0xfe}},
			{"too long", []byte{0x00, 0x10, 0x00, 0x00}},
			{"truncated create", append([]byte{0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0, 0, 9)},
		} {
			a := newRaw(t, tg.addr)
			a.nc.Write(tc.frame)
			f, err := a.readFrame()
			r.logf("%s: closed=%v reply=%v zxid=%s", tc.name, err != nil, f, r.Z(f.hdr.Zxid))
		}
		a := newRaw(t, tg.addr)
		r.do(a, "A", exists("/zookeeper", false))
		r.do(a, "A", jute.Request{Op: jute.OpMulti, Ops: []jute.Request{{Op: jute.OpCheck, Path: "/zookeeper", Version: -1}}})
	})
}
