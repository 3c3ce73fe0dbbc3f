package zkserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zktest"
)

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

// TestConformanceHandshakeEdges: connect requests a client may send.
func TestConformanceHandshakeEdges(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.do(a, "A", create(tg.path, "", 0))
		f := r.do(a, "A", exists(tg.path, false))
		// A client that has seen a later zxid than the server's.
		for _, ahead := range []int64{0, 1, 1 << 40} {
			// The connection, and a session it makes, end with the case.
			_, resp, err := dialRawZxid(t, tg.addr, f.hdr.Zxid+ahead)
			r.logf("lastZxidSeen +%d: refused=%v session=%v", ahead, err != nil, err == nil && resp.SessionID != 0)
		}
		// An unknown session id: refused with a zero timeout.
		_, resp, err := dialRaw(t, tg.addr, 0x7eadbeef, make([]byte, 16), false)
		r.logf("unknown session: err=%v timeout=%d id=%d", err, resp.TimeOut, resp.SessionID)
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

// TestConformanceEphemeralOnClose closes a zkclient session that
// holds an ephemeral sequential node and records what a watcher sees.
func TestConformanceEphemeralOnClose(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		ctx := t.Context()
		admin, _ := zkConnect(t, tg.addr)
		c, _ := zkConnect(t, tg.addr)
		p := tg.path
		admin.Create(ctx, p, nil, zkclient.Persistent, openACL)
		made, err := c.Create(ctx, p+"/lock-", nil, zkclient.EphemeralSequential, openACL)
		name := made.Path
		r.logf("created %s %v", name, err)
		st, ok, w, err := admin.ExistsW(ctx, name)
		r.logf("exists %v owner==session:%v %v", ok, st.EphemeralOwner == c.SessionID(), err)
		c.Close()
		ev := recvEvent(t, w)
		r.logf("event %v %s", ev.Type, ev.Path)
		kids, _, _ := admin.Children(ctx, p)
		r.logf("children %v", kids)
	})
}
