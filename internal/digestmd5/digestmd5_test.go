package digestmd5

import (
	"errors"
	"slices"
	"testing"
)

// The example exchange of RFC 2831, section 4.
func TestRFCExample(t *testing.T) {
	p := Params{
		User: "chris", Realm: "elwood.innosoft.com", Password: "secret",
		Nonce: "OA6MG9tEQGm2hh", Cnonce: "OA6MHXh6VqTrRk", NC: "00000001",
		Qop: "auth", DigestURI: "imap/elwood.innosoft.com",
	}
	if got, err := p.Response(); err != nil || got != "d388dad90d4bbd760a152321f2143af7" {
		t.Errorf("response = %s, %v", got, err)
	}
	if got, err := p.RspAuth(); err != nil || got != "ea40f60335c427b5527b84dbabcdfffd" {
		t.Errorf("rspauth = %s, %v", got, err)
	}
	p.Authzid = "chris"
	if got, _ := p.Response(); got == "d388dad90d4bbd760a152321f2143af7" {
		t.Error("the authzid does not enter the hash")
	}
}

func TestParse(t *testing.T) {
	ds, err := Parse([]byte(` realm="elwood.innosoft.com", realm="two",nonce="OA6M\"G9\\t",qop="auth,auth-int" , algorithm=md5-sess,charset=utf-8,,`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Directive{
		{"realm", "elwood.innosoft.com"}, {"realm", "two"}, {"nonce", `OA6M"G9\t`},
		{"qop", "auth,auth-int"}, {"algorithm", "md5-sess"}, {"charset", "utf-8"},
	}
	if !slices.Equal(ds, want) {
		t.Fatalf("got %q", ds)
	}
	if _, _, err := Single(ds, "realm"); !errors.Is(err, ErrFormat) {
		t.Errorf("a repeated directive is accepted: %v", err)
	}
	if v, ok, err := Single(ds, "nonce"); v != `OA6M"G9\t` || !ok || err != nil {
		t.Errorf("nonce: %q %v %v", v, ok, err)
	}
	if q := Quote(`OA6M"G9\t`); q != `"OA6M\"G9\\t"` {
		t.Errorf("quote: %s", q)
	}
	for _, bad := range []string{`realm`, `realm="x`, `realm="x" nonce="y"`, `=x`, "realm=\xff"} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
}

// Characters of ISO 8859-1 are hashed as such even under charset=utf-8,
// others as UTF-8 (which needs the charset).
func TestCharset(t *testing.T) {
	p := Params{User: "jürgen", Realm: "r", Password: "p", Nonce: "n", Cnonce: "c", NC: "00000001", Qop: "auth", DigestURI: "a/b"}
	latin, _ := p.Response()
	p.UTF8 = true
	if u, _ := p.Response(); u != latin {
		t.Error("a Latin-1 user name hashes differently under UTF-8")
	}
	p.User = "Ωmega"
	if _, err := p.Response(); err != nil {
		t.Error(err)
	}
	p.UTF8 = false
	if _, err := p.Response(); err == nil {
		t.Error("a non-Latin-1 user name without UTF-8 is accepted")
	}
}
