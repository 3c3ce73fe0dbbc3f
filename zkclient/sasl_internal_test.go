package zkclient

import (
	"context"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/digestmd5"
)

// TestDigestMD5Exchange plays the server's side of DIGEST-MD5 by hand:
// the client's response proves the password, carries what ZooKeeper's
// server checks (digest-uri, nc, qop, charset, authzid), and the client
// accepts the server's rspauth only when it is right.
func TestDigestMD5Exchange(t *testing.T) {
	const challenge = `realm="zk-sasl-md5",nonce="n0nce",qop="auth",charset=utf-8,algorithm=md5-sess`
	run := func(user, password string, rspauth func(p digestmd5.Params) string) error {
		ex, first, err := DigestMD5(user, password).Start(context.Background(), "127.0.0.1:2181")
		if err != nil || first == nil || len(first) != 0 {
			t.Fatalf("first token %q, %v: want empty", first, err)
		}
		resp, done, err := ex.Next([]byte(challenge))
		if err != nil || done {
			t.Fatalf("response: %v %v", done, err)
		}
		ds, err := digestmd5.Parse(resp)
		if err != nil {
			t.Fatal(err)
		}
		get := func(name string) string {
			v, ok, err := digestmd5.Single(ds, name)
			if !ok || err != nil {
				t.Fatalf("response %s without %s (%v)", resp, name, err)
			}
			return v
		}
		p := digestmd5.Params{
			User: get("username"), Realm: get("realm"), Password: "bob-secret", Authzid: get("authzid"),
			Nonce: get("nonce"), Cnonce: get("cnonce"), NC: get("nc"), Qop: get("qop"),
			DigestURI: get("digest-uri"), UTF8: get("charset") == "utf-8",
		}
		if p.Nonce != "n0nce" || p.NC != "00000001" || p.DigestURI != "zookeeper/zk-sasl-md5" || p.Authzid != user || !p.UTF8 {
			t.Fatalf("response %s", resp)
		}
		want, _ := p.Response()
		if get("response") != want {
			return errWrongProof
		}
		token, done, err := ex.Next([]byte("rspauth=" + rspauth(p)))
		if token != nil || !done {
			t.Fatalf("after rspauth: %q %v", token, done)
		}
		return err
	}
	right := func(p digestmd5.Params) string { v, _ := p.RspAuth(); return v }
	if err := run("bob", "bob-secret", right); err != nil {
		t.Fatalf("a right exchange: %v", err)
	}
	if err := run("bob", "wrong", right); err != errWrongProof {
		t.Fatalf("a wrong password proves itself: %v", err)
	}
	// A server that does not know the password cannot compute rspauth.
	forged := func(p digestmd5.Params) string { p.Password = "guess"; v, _ := p.RspAuth(); return v }
	if err := run("bob", "bob-secret", forged); err == nil || !strings.Contains(err.Error(), "rspauth") {
		t.Fatalf("a forged rspauth is accepted: %v", err)
	}

	for _, bad := range []string{"", `nonce="x",algorithm=md5-sess,qop="auth-conf"`, `nonce="x"`, `realm="r",algorithm=md5-sess`} {
		ex, _, _ := DigestMD5("bob", "pw").Start(context.Background(), "h:1")
		if _, _, err := ex.Next([]byte(bad)); err == nil {
			t.Errorf("challenge %q accepted", bad)
		}
	}
	ex, _, _ := DigestMD5("bob", "pw").Start(context.Background(), "h:1")
	if _, _, err := ex.Next(nil); err == nil || !strings.Contains(err.Error(), "no challenge") {
		t.Errorf("a null challenge: %v", err)
	}
}

type wrongProof struct{}

func (wrongProof) Error() string { return "wrong proof" }

var errWrongProof error = wrongProof{}
