package zkserver_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

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

// TestConformanceMultiEdges: transactions as kazoo, go-zookeeper and
// Curator build them, and ones that mix what ZooKeeper refuses.
func TestConformanceMultiEdges(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(b, "B", children(p, true))
		r.do(b, "B", exists(p+"/t", true))
		// Create then delete the same node; create, set, check, delete.
		r.do(a, "A", multi(create(p+"/t", "1", 0), del(p+"/t", -1)))
		r.do(a, "A", multi(create(p+"/t", "1", 0), setData(p+"/t", "2", 0), check(p+"/t", 1), del(p+"/t", 1)))
		r.do(a, "A", multi(create(p+"/t", "1", 0), setData(p+"/t", "2", 0), check(p+"/t", 1)))
		r.expectEventsUnordered(b, "B", 1)
		// Failures: at the first op, with a bad version, deleting a parent
		// with a child, a check of a missing node, NodeExists in the middle.
		r.do(a, "A", multi(del(p+"/missing", -1), create(p+"/u", "", 0)))
		r.do(a, "A", multi(setData(p+"/t", "3", 7)))
		r.do(a, "A", multi(create(p+"/v", "", 0), create(p+"/v/w", "", 0), del(p+"/v", -1)))
		r.do(a, "A", multi(check(p+"/missing", -1)))
		r.do(a, "A", multi(create(p+"/x", "", 0), create(p+"/t", "", 0), create(p+"/y", "", 0)))
		// A read inside a multi, a write inside a multiRead.
		r.do(a, "A", multi(create(p+"/r", "", 0), getData(p+"/t", false)))
		r.do(a, "A", jute.Request{Op: jute.OpMultiRead, Ops: []jute.Request{setData(p+"/t", "9", -1)}})
		r.do(a, "A", jute.Request{Op: jute.OpMultiRead, Ops: []jute.Request{getData(p+"/t", false), setData(p+"/t", "9", -1), getData(p+"/t", false)}})
		r.do(a, "A", jute.Request{Op: jute.OpMultiRead})
		r.do(a, "A", children(p, false))
		r.do(a, "A", getData(p+"/t", false))
	})
}
