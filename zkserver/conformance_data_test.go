package zkserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// nullCreate is a create whose data is a null buffer (length -1), as
// kazoo sends for create(path, None) and the Java client for a null
// byte[].
func nullCreate(op int32, p string, flags int32) jute.Request {
	return jute.Request{Op: op, Path: p, Data: nil, ACL: open, Flags: flags}
}

// TestConformanceNullData: ZooKeeper keeps null data apart from empty
// data, through create, create2, setData, multi and multiRead, and says
// 0 for the length of either.
func TestConformanceNullData(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.session(a.id, "A")
		p := tg.path
		r.do(a, "A", nullCreate(jute.OpCreate, p, 0))
		r.do(a, "A", getData(p, false))
		r.do(a, "A", exists(p, false))
		r.do(a, "A", create(p+"/empty", "", 0))
		r.do(a, "A", getData(p+"/empty", false))
		r.do(a, "A", nullCreate(jute.OpCreate2, p+"/c2", 0))
		r.do(a, "A", getData(p+"/c2", false))
		r.do(a, "A", nullCreate(jute.OpCreate, p+"/seq-", 2))
		r.do(a, "A", getData(p+"/seq-0000000003", false))
		r.do(a, "A", nullCreate(jute.OpCreate, p+"/eph", 1))
		r.do(a, "A", getData(p+"/eph", false))
		r.do(a, "A", nullCreate(jute.OpCreateContainer, p+"/box", 4))
		r.do(a, "A", getData(p+"/box", false))
		// setData: empty, then null, then data, then null again.
		r.do(a, "A", setData(p+"/empty", "", -1))
		r.do(a, "A", getData(p+"/empty", false))
		r.do(a, "A", jute.Request{Op: jute.OpSetData, Path: p + "/empty", Data: nil, Version: 1})
		r.do(a, "A", getData(p+"/empty", false))
		r.do(a, "A", setData(p+"/empty", "x", -1))
		r.do(a, "A", jute.Request{Op: jute.OpSetData, Path: p + "/empty", Data: nil, Version: -1})
		r.do(a, "A", getData(p+"/empty", false))
		// In a multi, and read back with multiRead.
		r.do(a, "A", multi(
			nullCreate(jute.OpCreate, p+"/m1", 0),
			jute.Request{Op: jute.OpSetData, Path: p + "/c2", Data: nil, Version: -1},
			create(p+"/m2", "", 0),
			nullCreate(jute.OpCreate2, p+"/m3", 0),
		))
		r.do(a, "A", jute.Request{Op: jute.OpMultiRead, Ops: []jute.Request{
			{Op: jute.OpGetData, Path: p + "/m1"},
			{Op: jute.OpGetData, Path: p + "/m2"},
			{Op: jute.OpGetData, Path: p + "/m3"},
			{Op: jute.OpGetData, Path: p + "/c2"},
			{Op: jute.OpGetChildren, Path: p + "/m1"},
		}})
		// The system nodes' data.
		r.do(a, "A", getData("/", false)) // ZooKeeper's root starts at cversion -1
		r.do(a, "A", getData("/zookeeper", false))
		r.do(a, "A", getData("/zookeeper/quota", false))
		r.do(a, "A", children(p, false))
	})
}

// TestConformanceCheckWatchesAnyConnection: ZooKeeper 3.8's checkWatches
// says OK when any connection watches the path in the table asked for,
// not only the asking one; removeWatches removes only the asking
// connection's watches.
func TestConformanceCheckWatchesAnyConnection(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		short := func(path string) string { return "~" + strings.TrimPrefix(path, p) }
		chk := func(c *rawClient, label, path string, typ int32) {
			r.do(c, fmt.Sprintf("%s check %s type=%d", label, short(path), typ),
				jute.Request{Op: jute.OpCheckWatches, Path: path, Mode: typ})
		}
		rm := func(c *rawClient, label, path string, typ int32) {
			r.do(c, fmt.Sprintf("%s remove %s type=%d", label, short(path), typ),
				jute.Request{Op: jute.OpRemoveWatches, Path: path, Mode: typ})
		}
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", create(p+"/kids", "", 0))
		r.do(a, "A", exists(p+"/w", true))      // data table
		r.do(a, "A", children(p+"/kids", true)) // child table
		r.do(a, "A", jute.Request{Op: jute.OpAddWatch, Path: p + "/pw", Mode: jute.AddWatchPersistent})
		r.do(a, "A", jute.Request{Op: jute.OpAddWatch, Path: p + "/r", Mode: jute.AddWatchPersistentRecursive})
		for _, typ := range []int32{jute.WatcherChildren, jute.WatcherData, jute.WatcherAny} {
			for _, path := range []string{p + "/w", p + "/kids", p + "/pw", p + "/r", p + "/r/below", p + "/none"} {
				chk(b, "B", path, typ) // B watches nothing
				chk(a, "A", path, typ)
			}
		}
		// B cannot remove A's watches; A's watch still fires.
		rm(b, "B", p+"/w", jute.WatcherAny)
		rm(b, "B", p+"/kids", jute.WatcherChildren)
		r.do(b, "B", create(p+"/w", "", 0))
		r.expectEvents(a, "A", 1)
		chk(b, "B", p+"/w", jute.WatcherData) // the one-shot watch is gone
		// Once B watches too, A's removal leaves B's watch.
		r.do(a, "A", getData(p+"/w", true))
		r.do(b, "B", getData(p+"/w", true))
		rm(a, "A", p+"/w", jute.WatcherData)
		chk(a, "A", p+"/w", jute.WatcherData)
		rm(a, "A", p+"/w", jute.WatcherData)
		r.do(a, "A", setData(p+"/w", "x", -1))
		r.expectEvents(b, "B", 1)
		chk(a, "A", p+"/w", jute.WatcherAny)
		// A persistent watch answers both tables, also after an event.
		rm(a, "A", p+"/pw", jute.WatcherChildren)
		chk(b, "B", p+"/pw", jute.WatcherChildren)
		chk(b, "B", p+"/pw", jute.WatcherData)
	})
}
