package zkserver_test

import (
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/internal/jute"
)

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

// kazooNullScript uses kazoo as a new user would, against the server
// argv[1], under the path argv[2]: null data (value None) through create,
// set, create2 and watches, the four-letter words kazoo sends, and
// server_version, which reads envi. It prints one line per result.
const kazooNullScript = `
base = sys.argv[2]
def show(label, v):
    print(label, repr(v).replace(base, "~"))
zk.create(base, None)
data, st = zk.get(base)
show("create None, get:", data)
show("  data_length:", st.data_length)
zk.set(base, b"")
show("set b'', get:", zk.get(base)[0])
zk.set(base, None)
show("set None, get:", zk.get(base)[0])
zk.set(base, b"v")
show("set b'v', get:", zk.get(base)[0])
zk.create(base + "/default")
show("create without a value, get:", zk.get(base + "/default")[0])
path, st = zk.create(base + "/n2", None, include_data=True)
show("create2 None:", (path, st.data_length, st.version))
show("  get:", zk.get(base + "/n2")[0])
zk.create(base + "/a/b/c", None, makepath=True)
show("makepath, the parents' and the node's data:", [zk.get(base + p)[0] for p in ("/a", "/a/b", "/a/b/c")])
zk.ensure_path(base + "/ensured")
show("ensure_path, get:", zk.get(base + "/ensured")[0])
show("children:", sorted(zk.get_children(base)))
show("children of a leaf:", zk.get_children(base + "/default"))
seen = []
got = threading.Event()
def watch(ev):
    seen.append((ev.type, ev.path))
    got.set()
zk.get(base + "/n2", watch=watch)
zk.set(base + "/n2", None)
got.wait(5)
show("watch after set None:", seen)
show("  get:", zk.get(base + "/n2")[0])
show("exists of null node, data_length:", zk.exists(base + "/n2").data_length)
show("server_version:", zk.server_version())
envi = zk.command(b"envi")
show("envi first line:", envi.splitlines()[0])
show("envi keys:", [l.split("=", 1)[0] for l in envi.splitlines()[1:]])
show("ruok:", zk.command(b"ruok"))
show("isro:", zk.command(b"isro"))
show("srvr mode:", [l for l in zk.command(b"srvr").splitlines() if l.startswith("Mode:")])
zk.delete(base, recursive=True)
show("deleted:", zk.exists(base))
zk.stop()
print("DONE")
`

// TestConformanceKazooNullData runs kazoo against both servers: null data
// stays null (kazoo's None), and server_version reads the version from
// envi.
func TestConformanceKazooNullData(t *testing.T) {
	if err := interop.KazooAvailable(); err != nil {
		t.Skip(err)
	}
	conform(t, func(t *testing.T, tg target, r *rec) {
		out := runKazoo(t, kazooNullScript, tg.addr, tg.path)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			r.logf("%s", line)
		}
	})
}
