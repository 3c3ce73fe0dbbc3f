package zkserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/digestmd5"
	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The SASL conformance cases compare a real ZooKeeper 3.8 configured
// with a JAAS Server section (zktest Options.SASLUsers) with zkserver
// given the same users, once as is and once requiring SASL
// (sessionRequireClientSASLAuth). The DIGEST-MD5 exchanges are made by
// hand, frame by frame, so that malformed and wrong responses can be
// sent; the transcripts record each answer's error code and the shape
// of its token (nonces and proofs vary, their length and validity are
// recorded). Each pair is started on first use.

var saslConfUsers = map[string]string{"bob": "bob-pw", "super": "super-pw"}

type saslPair struct {
	once     sync.Once
	require  bool
	real     *zktest.Cluster
	realErr  error
	emb      *zkserver.Server
	setupErr error
}

var saslPairs = [2]*saslPair{{}, {require: true}}

func closeSASLPairs() {
	for _, p := range saslPairs {
		if p.real != nil {
			p.real.Close()
		}
		if p.emb != nil {
			p.emb.Close()
		}
	}
}

func (p *saslPair) start() {
	p.once.Do(func() {
		if os.Getenv("ZKSERVER_NO_ZOOKEEPER") != "" {
			p.realErr = fmt.Errorf("ZKSERVER_NO_ZOOKEEPER is set")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		p.real, p.realErr = zktest.Start(ctx, zktest.Options{SASLUsers: saslConfUsers, RequireSASL: p.require, Heap: "256m", RealZooKeeper: true})
		p.emb = zkserver.NewServer(zkserver.Options{SASLUsers: saslConfUsers, RequireSASL: p.require})
		p.setupErr = p.emb.Start("127.0.0.1:0")
	})
}

// conformSASL runs body against both servers of the pair and compares
// the transcripts.
func conformSASL(t *testing.T, require bool, body func(t *testing.T, tg target, r *rec)) {
	t.Helper()
	p := saslPairs[0]
	if require {
		p = saslPairs[1]
	}
	p.start()
	if p.realErr != nil {
		skipWithoutZooKeeper(t, p.realErr)
		return
	}
	if p.setupErr != nil {
		t.Fatal(p.setupErr)
	}
	path := casePath(t)
	targets := []target{{name: "zookeeper", addr: p.real.Addr(0), path: path}, {name: "zkserver", addr: p.emb.Addr(), path: path}}
	var sides []side
	for _, tg := range targets {
		sides = append(sides, side{name: tg.name, addr: tg.addr, run: func(t *testing.T, r *rec) { body(t, tg, r) }})
	}
	compare(t, nil, sides)
}

// sasl sends a sasl request with token on c and records the answer: its
// error code, zxid and the shape of its token. It returns the token.
func (r *rec) sasl(c *rawClient, label string, token []byte) []byte {
	r.t.Helper()
	f := c.call(jute.Request{Op: jute.OpSASL, Token: token})
	d := jute.NewDecoder(f.body)
	reply := d.Buffer()
	r.logf("%s: sasl err=%d zxid=%d token=%s rest=%d", label, f.hdr.Err, f.hdr.Zxid, saslShape(reply), d.Len())
	return reply
}

// saslShape describes a server token: its directives, with the nonce's
// and rspauth's values replaced by their length.
func saslShape(tok []byte) string {
	if tok == nil {
		return "null"
	}
	ds, err := digestmd5.Parse(tok)
	if err != nil {
		return fmt.Sprintf("unparsable(%q)", tok)
	}
	var parts []string
	for _, d := range ds {
		v := d.Value
		if d.Name == "nonce" || d.Name == "rspauth" {
			v = fmt.Sprintf("<%d chars>", len(v))
		}
		parts = append(parts, d.Name+"="+v)
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// closed records whether the server closes c's connection (within a
// second, or the connection counts as open).
func (r *rec) closed(c *rawClient, label string) {
	r.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.readFrame()
	var ne net.Error
	r.logf("%s: then closed: %v", label, err != nil && !(errors.As(err, &ne) && ne.Timeout()))
}

// saslResponse builds a DIGEST-MD5 response to challenge for user and
// password, as ZooKeeper's Java client does; edit may change the values
// (p) and the directives sent (by name; "" drops one) before the proof is
// computed from p. It returns the token and the rspauth a right server
// answers.
func saslResponse(t *testing.T, challenge []byte, user, password string, edit func(p *digestmd5.Params, d map[string]string)) ([]byte, string) {
	t.Helper()
	ds, err := digestmd5.Parse(challenge)
	if err != nil {
		t.Fatalf("challenge %q: %v", challenge, err)
	}
	nonce, _, _ := digestmd5.Single(ds, "nonce")
	p := digestmd5.Params{User: user, Realm: digestmd5.ServerName, Password: password, Authzid: user,
		Nonce: nonce, Cnonce: "c0nce", NC: "00000001", Qop: "auth", DigestURI: digestmd5.DigestURI, UTF8: true}
	d := map[string]string{}
	if edit != nil {
		edit(&p, d)
	}
	proof, err := p.Response()
	if err != nil {
		t.Fatal(err)
	}
	rsp, _ := p.RspAuth()
	var b []string
	for _, kv := range [][2]string{
		{"charset", "utf-8"}, {"username", digestmd5.Quote(p.User)}, {"realm", digestmd5.Quote(p.Realm)},
		{"nonce", digestmd5.Quote(p.Nonce)}, {"nc", p.NC}, {"cnonce", digestmd5.Quote(p.Cnonce)},
		{"digest-uri", digestmd5.Quote(p.DigestURI)}, {"maxbuf", "65536"}, {"response", proof},
		{"qop", p.Qop}, {"authzid", digestmd5.Quote(p.Authzid)},
	} {
		v, changed := d[kv[0]]
		if !changed {
			v = kv[1]
		}
		if v != "" {
			b = append(b, kv[0]+"="+v)
		}
	}
	return []byte(strings.Join(b, ",")), rsp
}

// login runs a whole exchange on c and records it, and whether the
// server's rspauth is the right one.
func (r *rec) login(c *rawClient, label, user, password string, edit func(p *digestmd5.Params, d map[string]string)) {
	r.t.Helper()
	ch := r.sasl(c, label, []byte{})
	resp, want := saslResponse(r.t, ch, user, password, edit)
	final := r.sasl(c, label, resp)
	if final != nil {
		ds, _ := digestmd5.Parse(final)
		got, _, _ := digestmd5.Single(ds, "rspauth")
		r.logf("%s: rspauth right: %v", label, got == want)
	}
}

// TestConformanceSASL: DIGEST-MD5 as ZooKeeper's JAAS configuration
// serves it. The challenge's shape; a right login (the answers' zxid, the
// rspauth, whoAmI); sasl ACLs (who reads, which ids are valid, auth ACLs
// with a SASL identity, the SASL user "super" matching every sasl entry);
// refusals (wrong password, unknown user, wrong nonce, digest-uri, nonce
// count, qop, garbage, an exchange repeated after completion), each
// answered AuthFailed and closing the connection; what the server does
// with an initial token, another authorization id, a response without
// charset; an auth packet of scheme sasl.
func TestConformanceSASL(t *testing.T) {
	conformSASL(t, false, func(t *testing.T, tg target, r *rec) {
		p := tg.path
		a := newRaw(t, tg.addr)
		r.session(a.id, "A")
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.login(a, "A", "bob", "bob-pw", nil)
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		saslACL := func(id string) []jute.ACL {
			return []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: id}}}
		}
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/bob", Data: []byte("bob's"), ACL: saslACL("bob")})
		r.do(a, "A", getData(p+"/bob", false))
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/bob"})
		b := newRaw(t, tg.addr)
		r.do(b, "B", getData(p+"/bob", false))
		for i, id := range []string{"bob@EXAMPLE.COM", "zookeeper/host@EXAMPLE.COM", "a@b@c", "a/b/c@R", "x/y", "", "@", "a/b/c"} {
			r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: fmt.Sprintf("%s/id%d", p, i), ACL: saslACL(id)})
		}
		authACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth", ID: ""}}}
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/auth", ACL: authACL})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/auth"})
		r.do(b, "B", jute.Request{Op: jute.OpCreate, Path: p + "/auth-b", ACL: authACL})
		// Another exchange on an authenticated connection.
		r.sasl(a, "A", []byte{})
		r.closed(a, "A")

		s := newRaw(t, tg.addr)
		r.login(s, "S", "super", "super-pw", nil)
		r.do(s, "S", getData(p+"/bob", false))
		r.do(s, "S", jute.Request{Op: jute.OpWhoAmI})

		refusals := []struct {
			name, user, password string
			edit                 func(p *digestmd5.Params, d map[string]string)
		}{
			{"wrong password", "bob", "nope", nil},
			// Not bob's password: ZooKeeper 3.8.0 would let mallory in
			// with the password of the last user who logged in
			// (ZOOKEEPER-4839).
			{"unknown user", "mallory", "mallory-pw", nil},
			{"wrong nonce", "bob", "bob-pw", func(p *digestmd5.Params, _ map[string]string) { p.Nonce += "x" }},
			{"digest-uri", "bob", "bob-pw", func(p *digestmd5.Params, _ map[string]string) { p.DigestURI = "zookeeper/localhost" }},
			{"nonce count", "bob", "bob-pw", func(p *digestmd5.Params, _ map[string]string) { p.NC = "00000002" }},
			{"qop auth-int", "bob", "bob-pw", func(_ *digestmd5.Params, d map[string]string) { d["qop"] = "auth-int" }},
			{"no cnonce", "bob", "bob-pw", func(_ *digestmd5.Params, d map[string]string) { d["cnonce"] = "" }},
			{"realm", "bob", "bob-pw", func(p *digestmd5.Params, _ map[string]string) { p.Realm = "other" }},
			{"charset", "bob", "bob-pw", func(_ *digestmd5.Params, d map[string]string) { d["charset"] = "iso-8859-1" }},
		}
		for _, f := range refusals {
			c := newRaw(t, tg.addr)
			r.login(c, "C("+f.name+")", f.user, f.password, f.edit)
			r.closed(c, "C("+f.name+")")
		}
		g := newRaw(t, tg.addr)
		r.sasl(g, "G", []byte{})
		r.sasl(g, "G", []byte("not a response"))
		r.closed(g, "G")

		// Accepted variations.
		h := newRaw(t, tg.addr)
		r.sasl(h, "H", []byte("an initial token"))
		i := newRaw(t, tg.addr)
		r.login(i, "I(authzid)", "bob", "bob-pw", func(p *digestmd5.Params, _ map[string]string) { p.Authzid = "super" })
		r.do(i, "I", jute.Request{Op: jute.OpWhoAmI})
		j := newRaw(t, tg.addr)
		r.login(j, "J(no authzid, no charset)", "bob", "bob-pw", func(p *digestmd5.Params, d map[string]string) {
			p.Authzid, p.UTF8, d["authzid"], d["charset"] = "", false, "", ""
		})
		r.do(j, "J", jute.Request{Op: jute.OpWhoAmI})

		k := newRaw(t, tg.addr)
		f := k.call(jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "sasl", Auth: []byte("bob")})
		r.logf("auth packet of scheme sasl: err=%d", f.hdr.Err)
		r.closed(k, "K")
		r.do(s, "S", jute.Request{Op: jute.OpDelete, Path: p + "/bob", Version: -1})
	})
}

// TestConformanceSASLRequired: with sessionRequireClientSASLAuth, a
// connection that sends anything but auth and sasl before it has
// completed SASL (a read, a ping, closeSession) is answered -124 and
// closed; auth packets pass; a failed exchange is answered -124 too.
func TestConformanceSASLRequired(t *testing.T) {
	conformSASL(t, true, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.do(a, "A", getData("/", false))
		r.closed(a, "A")
		b := newRaw(t, tg.addr)
		r.do(b, "B", jute.Request{Op: jute.OpPing, Xid: jute.XidPing})
		r.closed(b, "B")
		c := newRaw(t, tg.addr)
		r.do(c, "C", jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "digest", Auth: []byte("u:p")})
		r.login(c, "C", "bob", "bob-pw", nil)
		r.do(c, "C", jute.Request{Op: jute.OpWhoAmI})
		r.do(c, "C", exists("/", false))
		r.do(c, "C", jute.Request{Op: jute.OpPing, Xid: jute.XidPing})
		d := newRaw(t, tg.addr)
		r.login(d, "D", "bob", "wrong", nil)
		r.closed(d, "D")
		e := newRaw(t, tg.addr)
		r.do(e, "E", jute.Request{Op: jute.OpCloseSession})
		r.closed(e, "E")
	})
}

// TestConformanceSASLOff: a server without SASL configured answers a
// sasl request with a null token, keeps the connection and knows no sasl
// ACLs.
func TestConformanceSASLOff(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		a := newRaw(t, tg.addr)
		r.sasl(a, "A", []byte{})
		r.sasl(a, "A", []byte("username=\"bob\""))
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: tg.path, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "bob"}}}})
	})
}
