package zkserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// TestTLS: the secure port authenticates a client certificate's subject
// under the x509 scheme, refuses a client without one, answers
// four-letter words, and survives Restart on the same port.
func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	s := tlsServer(t, ca, "127.0.0.1:0")
	subject := pkix.Name{CommonName: "app, one", Organization: []string{"Example"}, Country: []string{"DE"}}
	const id = `CN=app\, one,O=Example,C=DE` // as X500Principal.getName() writes it
	cfg := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.clientCert(t, subject)}, ServerName: "127.0.0.1"}
	c, err := dialRawTLS(t, s.SecureAddr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(whoAmI(t, c), " "); got != "x509:"+id+" ip:127.0.0.1" {
		t.Fatalf("whoAmI over TLS: %s", got)
	}
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: id}}}
	if f := c.call(jute.Request{Op: jute.OpCreate, Path: "/mine", Data: []byte("s"), ACL: acl}); f.hdr.Err != 0 {
		t.Fatalf("create with an x509 ACL: %d", f.hdr.Err)
	}
	if f := c.call(getData("/mine", false)); f.hdr.Err != 0 {
		t.Fatalf("the certificate's owner reads: %d", f.hdr.Err)
	}
	plain := newRaw(t, s.Addr())
	if f := plain.call(getData("/mine", false)); f.hdr.Err != jute.ErrNoAuth {
		t.Fatalf("a plain client reads an x509 node: %d", f.hdr.Err)
	}
	// Another certificate is another identity.
	other := cfg.Clone()
	other.Certificates = []tls.Certificate{ca.clientCert(t, pkix.Name{CommonName: "app, two"})}
	c2, err := dialRawTLS(t, s.SecureAddr(), other)
	if err != nil {
		t.Fatal(err)
	}
	if f := c2.call(getData("/mine", false)); f.hdr.Err != jute.ErrNoAuth {
		t.Fatalf("another certificate reads: %d", f.hdr.Err)
	}
	// No certificate, or one from another CA: no session.
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":   nil,
		"another CA's one": {newTestCA(t).clientCert(t, subject)},
	} {
		bad := cfg.Clone()
		bad.Certificates = certs
		if c, err := dialRawTLS(t, s.SecureAddr(), bad); err == nil && c.id != 0 {
			t.Errorf("%s: a session over TLS", name)
		}
	}
	// Four-letter words over TLS; conf names both ports.
	nc, err := tls.Dial("tcp", s.SecureAddr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("conf"))
	b, _ := readAll(nc)
	_, securePort, _ := net.SplitHostPort(s.SecureAddr())
	if !strings.Contains(b, "\nsecureClientPort="+securePort+"\n") {
		t.Fatalf("conf over TLS:\n%s", b)
	}
	secure := s.SecureAddr()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.SecureAddr() != secure {
		t.Fatalf("secure address after Restart: %s, want %s", s.SecureAddr(), secure)
	}
	if _, err := dialRawTLS(t, s.SecureAddr(), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestTLSOnly: a server with a secure port and no plain one, and the
// x509 scheme refused by a server without TLS.
func TestTLSOnly(t *testing.T) {
	ca := newTestCA(t)
	s := tlsServer(t, ca, "")
	if s.Addr() != "" || s.SecureAddr() == "" {
		t.Fatalf("Addr %q SecureAddr %q", s.Addr(), s.SecureAddr())
	}
	cfg := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.clientCert(t, pkix.Name{CommonName: "c"})}, ServerName: "127.0.0.1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	zc, err := zkclient.Connect(ctx, []string{s.SecureAddr()}, zkclient.WithTLS(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Create(ctx, "/x", nil, zkclient.Persistent, []zkclient.ACL{{Perms: zkclient.PermAll, Scheme: "x509", ID: "CN=c"}}); err != nil {
		t.Fatalf("zkclient over TLS, x509 ACL: %v", err)
	}
	if _, _, err := zc.Get(ctx, "/x"); err != nil {
		t.Fatal(err)
	}

	plainOnly := zkserver.RunT(t)
	c := newRaw(t, plainOnly.Addr())
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: "CN=c"}}}
	if f := c.call(jute.Request{Op: jute.OpCreate, Path: "/x", ACL: acl}); f.hdr.Err != jute.ErrInvalidACL {
		t.Fatalf("x509 ACL on a server without TLS: %d, want InvalidACL", f.hdr.Err)
	}
}
