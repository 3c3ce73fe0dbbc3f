package zkserver_test

import (
	"fmt"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

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
