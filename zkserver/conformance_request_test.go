package zkserver_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

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
