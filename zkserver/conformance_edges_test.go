package zkserver_test

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// The edge cases of the calls client libraries make in normal use:
// go-zookeeper/zk (Create with each flag, CreateContainer, CreateTTL,
// CreateProtectedEphemeralSequential, Children, Multi, SetACL, AddAuth,
// Sync), kazoo (create with makepath and include_data, get_children,
// transaction with check, set_acls, add_auth, ensure_path, sync) and
// Curator (creatingParentContainersIfNeeded, transaction, guaranteed
// delete, checkWatches when a specific watcher is removed, getConfig).

// TestConformancePathNames: the names ZooKeeper accepts and refuses, as a
// client's unvalidated path reaches it (kazoo and go-zookeeper check
// little): unicode inside and outside what PathUtils allows, invalid
// UTF-8, relative segments, long names and deep paths, and the system
// nodes.
func TestConformancePathNames(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		for _, name := range []string{
			"é-ü", "日本語", "\u00a0nbsp", "tab\tin", "\u007f", "\u0085", "\u00a1", "\ud7ff", "\ue000", "\uf8ff",
			"\uf900", "\ufffd", "\ufff0", "😀", "bad\xffutf8", "a b", "-", ".", "..", "...", ".x", "x.", "%2f",
			"back\\slash", "quote\"",
		} {
			r.do(a, "A "+label(name), create(p+"/"+name, "", 0))
		}
		long := p + "/" + strings.Repeat("n", 10000)
		f := a.call(create(long, "", 0))
		r.logf("a 10000-byte name: create err=%d, path returned intact: %v", f.hdr.Err, jute.NewDecoder(f.body).String() == long)
		f = a.call(getData(long, false))
		r.logf("  getData err=%d", f.hdr.Err)
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: p})
		for _, bad := range []string{"", "relative", p + "/", p + "//x", p + "/./x", p + "/../x", "/.", "/.."} {
			r.do(a, "A create "+label(bad), create(bad, "", 0))
			r.do(a, "A exists "+label(bad), exists(bad, false))
			r.do(a, "A getData "+label(bad), getData(bad, false))
			r.do(a, "A delete "+label(bad), del(bad, -1))
			r.do(a, "A setData "+label(bad), setData(bad, "", -1))
			r.do(a, "A children "+label(bad), children(bad, false))
		}
		// Deep paths.
		deep := p
		for i := range 100 {
			deep += fmt.Sprintf("/%d", i)
			if f := a.call(create(deep, "", 0)); f.hdr.Err != 0 {
				r.logf("deep create %d: err=%d", i, f.hdr.Err)
			}
		}
		r.do(a, "A deep", getData(deep, false))
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p + "/0"})
		// The root and the system nodes.
		r.do(a, "A delete /", del("/", -1))
		r.do(a, "A create /", create("/", "", 0))
		r.do(a, "A delete /zookeeper", del("/zookeeper", -1))
		r.do(a, "A delete /zookeeper/quota", del("/zookeeper/quota", -1))
		r.do(a, "A setData /zookeeper/config", setData("/zookeeper/config", "x", -1))
		r.do(a, "A create /zookeeper/x", create("/zookeeper/x", "", 0))
		r.do(a, "A delete /zookeeper/x", del("/zookeeper/x", -1))
		// A watch on a path that cannot exist is still set.
		r.do(a, "A exists watch relative", exists("relative", true))
		// (checkWatches on it, once watched: ZooKeeper 3.8 answers
		// MarshallingError, its request-path statistics failing on a
		// relative path; zkserver says OK. Not compared.)
		r.do(a, "A exists watch nul", exists("/a\x00b", true))
		r.do(a, "A check nul", jute.Request{Op: jute.OpCheckWatches, Path: "/a\x00b", Mode: jute.WatcherData})
		r.do(a, "A sync missing", jute.Request{Op: jute.OpSync, Path: p + "/missing"})
		r.do(a, "A sync bad", jute.Request{Op: jute.OpSync, Path: "relative"})
		r.do(a, "A getEphemerals relative", jute.Request{Op: jute.OpGetEphemerals, Path: "relative"})
		r.do(a, "A getAllChildrenNumber bad", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p + "/"})
	})
}

// label shortens a name for a transcript label.
func label(s string) string {
	if len(s) > 20 {
		return fmt.Sprintf("%q...(%d bytes)", s[:10], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// TestConformanceLargeRequests: a listing of thousands of children, a
// multi of hundreds of operations (failing at the last one, too), a
// multiRead of many reads, data near jute.maxbuffer, and frames at and
// beyond it.
func TestConformanceLargeRequests(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		name := strings.Repeat("c", 60)
		const kids = 3000
		for i := range kids {
			a.send(create(fmt.Sprintf("%s/%s-%05d", p, name, i), "", 0))
		}
		a.nc.SetDeadline(time.Now().Add(30 * time.Second))
		errs := 0
		for range kids {
			f, err := a.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if f.hdr.Err != 0 {
				errs++
			}
		}
		r.logf("%d pipelined creates: %d errors", kids, errs)
		f := a.call(children(p, false))
		d := jute.NewDecoder(f.body)
		list := d.Strings()
		var st jute.Stat
		st.Decode(d)
		r.logf("listing: err=%d children=%d bytes=%d %s", f.hdr.Err, len(list), len(f.body), r.fmtStat(st))
		r.do(a, "A", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p})

		var ops []jute.Request
		for i := range 500 {
			ops = append(ops, create(fmt.Sprintf("%s/m%03d", p, i), "x", 0))
		}
		f = a.call(multi(ops...))
		r.logf("multi of 500 creates: err=%d bytes=%d", f.hdr.Err, len(f.body))
		ops = append(ops[:0], setData(p, "y", -1))
		for i := range 499 {
			ops = append(ops, setData(fmt.Sprintf("%s/m%03d", p, i), "z", -1))
		}
		ops = append(ops, setData(p+"/missing", "z", -1))
		f = a.call(multi(ops...))
		res := r.results(jute.NewDecoder(f.body))
		r.logf("multi of 501 failing last: err=%d bytes=%d first=%s last=%s", f.hdr.Err, len(f.body),
			res[:strings.Index(res, "]")+1], res[strings.LastIndex(res, "["):])
		var reads []jute.Request
		for i := range 200 {
			reads = append(reads, jute.Request{Op: jute.OpGetData, Path: fmt.Sprintf("%s/m%03d", p, i)})
		}
		f = a.call(jute.Request{Op: jute.OpMultiRead, Ops: reads})
		r.logf("multiRead of 200: err=%d bytes=%d", f.hdr.Err, len(f.body))

		// Data: 1,000,000 bytes fit in a request; a frame longer than
		// jute.maxbuffer (1,048,575 bytes) closes the connection.
		big := strings.Repeat("d", 1000000)
		r.do(a, "A big create", jute.Request{Op: jute.OpCreate, Path: p + "/big", Data: []byte(big), ACL: open})
		f = a.call(getData(p+"/big", false))
		got := jute.NewDecoder(f.body).Buffer()
		r.logf("big getData: err=%d intact=%v", f.hdr.Err, bytes.Equal(got, []byte(big)))
		for _, size := range []int{1048575, 1048575 + 1} {
			c := newRaw(t, tg.addr)
			req := setData(p+"/big", "", -1)
			// xid, type, the path's length and bytes, the data's length
			// and bytes, the version
			req.Data = bytes.Repeat([]byte("e"), size-(4+4+4+len(req.Path)+4+4))
			req.Xid = 1000
			e := jute.NewFrameEncoder()
			req.Encode(e)
			// A server that refuses the frame may close the connection
			// while it is still being written: not an error here.
			c.nc.Write(e.Frame())
			c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			f, err := c.readFrame()
			r.logf("setData in a frame of %d bytes: answered=%v err=%d xid match=%v", size, err == nil, f.hdr.Err, f.hdr.Xid == req.Xid)
		}
	})
}

// TestConformanceACLEdges: ACLs as libraries build them (kazoo's
// make_acl, go-zookeeper's DigestACL, Curator's ACLProvider), and the
// odd ones a caller can send.
func TestConformanceACLEdges(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		p := tg.path
		acl := func(perms int32, scheme, id string) []jute.ACL {
			return []jute.ACL{{Perms: perms, ID: jute.ID{Scheme: scheme, ID: id}}}
		}
		createACL := func(c *rawClient, label, path string, list []jute.ACL) {
			r.do(c, label, jute.Request{Op: jute.OpCreate, Path: path, ACL: list})
		}
		r.do(a, "A", create(p, "", 0))
		for i, tc := range []struct {
			name string
			acl  []jute.ACL
		}{
			{"perms 0", acl(0, "world", "anyone")},
			{"perms 0xff", acl(0xff, "world", "anyone")},
			{"perms -1", acl(-1, "world", "anyone")},
			{"world:someone", acl(31, "world", "someone")},
			{"world empty id", acl(31, "world", "")},
			{"digest without colon", acl(31, "digest", "alice")},
			{"digest with two colons", acl(31, "digest", "alice:x:y")},
			{"digest empty user", acl(31, "digest", ":hash")},
			{"ip bad", acl(31, "ip", "999.1.1.1")},
			{"ip /33", acl(31, "ip", "10.0.0.0/33")},
			{"ip /0", acl(31, "ip", "0.0.0.0/0")},
			{"ip 127.0.0.1/32", acl(31, "ip", "127.0.0.1/32")},
			{"ipv6", acl(31, "ip", "::1")},
			{"ipv6 /64", acl(31, "ip", "fe80::/64")},
			{"x509 without a secure port", acl(31, "x509", "CN=a")},
			{"sasl", acl(31, "sasl", "alice")},
			{"super", acl(31, "super", "x")},
			{"duplicates", append(acl(31, "world", "anyone"), acl(31, "world", "anyone")...)},
			{"same id, two perms", append(acl(1, "world", "anyone"), acl(2, "world", "anyone")...)},
			{"one bad entry among good", append(acl(31, "world", "anyone"), acl(31, "bogus", "x")...)},
			{"empty", []jute.ACL{}},
		} {
			path := fmt.Sprintf("%s/acl%02d", p, i)
			createACL(a, "A create "+tc.name, path, tc.acl)
			r.do(a, "A getACL "+tc.name, jute.Request{Op: jute.OpGetACL, Path: path})
			r.do(b, "B getData "+tc.name, getData(path, false))
			r.do(b, "B setData "+tc.name, setData(path, "", -1))
			r.do(b, "B create child "+tc.name, create(path+"/c", "", 0))
			r.do(b, "B delete child "+tc.name, del(path+"/c", -1))
		}
		// Authentication as kazoo and go-zookeeper send it.
		for _, auth := range []string{"nocolon", "alice:", ":pw", "a:b:c", ""} {
			c := newRaw(t, tg.addr)
			f := c.call(jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "digest", Auth: []byte(auth)})
			r.logf("auth digest %q: err=%d", auth, f.hdr.Err)
			if f.hdr.Err == 0 {
				r.do(c, fmt.Sprintf("C(%q)", auth), jute.Request{Op: jute.OpWhoAmI})
				createACL(c, fmt.Sprintf("C(%q) auth ACL", auth), fmt.Sprintf("%s/auth-%x", p, auth), acl(31, "auth", ""))
				r.do(c, fmt.Sprintf("C(%q) getACL", auth), jute.Request{Op: jute.OpGetACL, Path: fmt.Sprintf("%s/auth-%x", p, auth)})
			}
		}
		c := newRaw(t, tg.addr)
		f := c.call(jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "ip", Auth: []byte("10.9.9.9")})
		r.logf("auth ip: err=%d", f.hdr.Err)
		if f.hdr.Err == 0 {
			r.do(c, "C(ip)", jute.Request{Op: jute.OpWhoAmI})
		}
		// Permissions: create needs CREATE on the parent, delete DELETE on
		// the parent, getChildren READ; exists needs nothing.
		createACL(a, "A", p+"/ro", acl(jute.PermRead, "world", "anyone"))
		createACL(a, "A", p+"/nocreate", acl(jute.PermAll&^jute.PermCreate, "world", "anyone"))
		createACL(a, "A", p+"/nodelete", acl(jute.PermAll, "world", "anyone"))
		r.do(a, "A", create(p+"/nodelete/child", "", 0))
		r.do(a, "A", jute.Request{Op: jute.OpSetACL, Path: p + "/nodelete", ACL: acl(jute.PermAll&^jute.PermDelete, "world", "anyone"), Version: 0})
		createACL(a, "A", p+"/noread", acl(jute.PermAll&^jute.PermRead, "world", "anyone"))
		r.do(b, "B", create(p+"/nocreate/x", "", 0))
		r.do(b, "B", del(p+"/nodelete/child", -1))
		r.do(b, "B", jute.Request{Op: jute.OpGetChildren, Path: p + "/noread"})
		r.do(b, "B", exists(p+"/noread", false))
		r.do(b, "B", getData(p+"/noread", false))
		r.do(b, "B", jute.Request{Op: jute.OpGetACL, Path: p + "/noread"})
		r.do(b, "B", jute.Request{Op: jute.OpGetAllChildrenNumber, Path: p + "/noread"})
		r.do(b, "B", jute.Request{Op: jute.OpSetACL, Path: p + "/ro", ACL: open, Version: -1})
		r.do(b, "B", multi(check(p+"/noread", -1)))
		r.do(b, "B", multi(check(p+"/ro", -1)))
	})
}

// TestConformanceCreateModes: every create opcode with every flag, with
// TTLs (disabled on both servers, as by default) and without.
func TestConformanceCreateModes(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.session(a.id, "A")
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		for _, op := range []int32{jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL} {
			for _, flags := range []int32{-1, 0, 1, 2, 3, 4, 5, 6, 7} {
				for _, ttl := range []int64{-1, 0, 1000} {
					if op != jute.OpCreateTTL && ttl != -1 {
						continue // only createTTL carries a TTL
					}
					if op == jute.OpCreateTTL && ttl < 0 && flags >= 0 && flags <= 4 {
						// ZooKeeper 3.8.0 accepts this request, then fails
						// applying it and exits: not sent to the shared
						// server (zkserver answers BadArguments).
						continue
					}
					path := fmt.Sprintf("%s/op%d-f%d-t%d-", p, op, flags, ttl)
					r.do(a, fmt.Sprintf("A op=%d flags=%d ttl=%d", op, flags, ttl),
						jute.Request{Op: op, Path: path, ACL: open, Flags: flags, TTL: ttl})
				}
			}
		}
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: p})
		// A multi with each create flavour.
		r.do(a, "A", multi(
			jute.Request{Op: jute.OpCreate, Path: p + "/m-", ACL: open, Flags: 3},
			jute.Request{Op: jute.OpCreate2, Path: p + "/m2", ACL: open, Flags: 1},
			jute.Request{Op: jute.OpCreateContainer, Path: p + "/mc", ACL: open, Flags: 4},
		))
		r.do(a, "A", multi(jute.Request{Op: jute.OpCreateTTL, Path: p + "/mt", ACL: open, Flags: 5, TTL: 100}))
		// Curator's creatingParentContainersIfNeeded: containers for the
		// parents, NodeExists for those already there.
		r.do(a, "A", jute.Request{Op: jute.OpCreateContainer, Path: p + "/cont", ACL: open, Flags: 4})
		r.do(a, "A", jute.Request{Op: jute.OpCreateContainer, Path: p + "/cont", ACL: open, Flags: 4})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/cont/leaf-", ACL: open, Flags: 3})
		r.do(a, "A", exists(p+"/cont", false))
		// go-zookeeper's and Curator's protected ephemeral sequential
		// nodes: a _c_ prefix, found again by listing.
		r.do(a, "A", create(p+"/_c_0f0f0f0f-lock-", "", 3))
		r.do(a, "A", jute.Request{Op: jute.OpGetChildren, Path: p + "/cont"})
		r.do(a, "A", jute.Request{Op: jute.OpGetEphemerals, Path: p})
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

// TestConformanceHandshakeEdges: connect requests a client may send.
func TestConformanceHandshakeEdges(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.do(a, "A", create(tg.path, "", 0))
		f := r.do(a, "A", exists(tg.path, false))
		// A client that has seen a later zxid than the server's.
		for _, ahead := range []int64{0, 1, 1 << 40} {
			nc, resp, err := dialRawZxid(t, tg.addr, f.hdr.Zxid+ahead)
			r.logf("lastZxidSeen +%d: refused=%v session=%v", ahead, err != nil, err == nil && resp.SessionID != 0)
			if nc != nil {
				nc.Close()
			}
		}
		// An unknown session id: refused with a zero timeout.
		_, resp, err := dialRaw(t, tg.addr, 0x7eadbeef, make([]byte, 16), false)
		r.logf("unknown session: err=%v timeout=%d id=%d", err, resp.TimeOut, resp.SessionID)
	})
}

// dialRawZxid sends a connect request for a new session that says it has
// seen zxid, and returns the connection and the answer, if any.
func dialRawZxid(t *testing.T, addr string, zxid int64) (net.Conn, jute.ConnectResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := jute.ConnectRequest{TimeOut: 4000, LastZxidSeen: zxid, Passwd: make([]byte, 16)}
	e := jute.NewFrameEncoder()
	req.Encode(e)
	nc.Write(e.Frame())
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return nc, jute.ConnectResponse{}, err
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	return nc, resp, nil
}
