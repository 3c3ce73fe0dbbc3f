package zkserver_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zktest"
)

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

// TestConformanceReconnectCatchUp cuts a client's connection (through
// zktest.Proxy) while its watched nodes change, and checks which events
// the server delivers once the client reconnects with SetWatches.
func TestConformanceReconnectCatchUp(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		ctx := t.Context()
		admin, _ := zkConnect(t, tg.addr)
		proxy, err := zktest.NewProxy(tg.addr)
		if err != nil {
			t.Fatal(err)
		}
		// Closed after c (cleanups run last first), so that c's Close
		// still reaches the server and ends its session.
		t.Cleanup(func() { proxy.Close() })
		c, states := zkConnect(t, proxy.Addr())
		p := tg.path
		for _, n := range []string{p, p + "/a", p + "/b", p + "/same"} {
			if _, err := admin.Create(ctx, n, nil, zkclient.Persistent, openACL); err != nil {
				t.Fatal(err)
			}
		}
		watch := func(_ any, _ zkclient.Stat, w *zkclient.Watch, err error) *zkclient.Watch {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		exists := func(st zkclient.Stat, ok bool, w *zkclient.Watch, err error) *zkclient.Watch {
			return watch(ok, st, w, err)
		}
		wa := watch(c.GetW(ctx, p+"/a"))
		wb := watch(c.GetW(ctx, p+"/b"))
		wnew := exists(c.ExistsW(ctx, p+"/new"))
		wkids := watch(c.ChildrenW(ctx, p))
		wsame := watch(c.GetW(ctx, p+"/same"))

		proxy.Refuse(true)
		proxy.Cut()
		if !states.wait(zkclient.StateSuspended, 10*time.Second) {
			t.Fatal("not disconnected")
		}
		admin.Set(ctx, p+"/a", []byte("x"), -1)
		admin.Delete(ctx, p+"/b", -1)
		admin.Create(ctx, p+"/new", nil, zkclient.Persistent, openACL)
		proxy.Refuse(false)
		if !states.wait(zkclient.StateReconnected, 10*time.Second) {
			t.Fatal("no reconnect")
		}
		for _, w := range []struct {
			name string
			w    *zkclient.Watch
		}{{"a", wa}, {"b", wb}, {"new", wnew}, {"kids", wkids}} {
			ev := recvEvent(t, w.w)
			r.logf("%s: %v %s", w.name, ev.Type, ev.Path)
		}
		// The unchanged node's watch was re-registered and still fires.
		admin.Set(ctx, p+"/same", []byte("y"), -1)
		ev := recvEvent(t, wsame)
		r.logf("same: %v %s", ev.Type, ev.Path)
	})
}
