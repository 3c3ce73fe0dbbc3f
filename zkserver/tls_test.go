package zkserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// testCA is a throwaway certificate authority for TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, cert := issue(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "zkserver test CA"},
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue creates a key and a certificate from template, signed by parent
// (self-signed if nil).
func issue(t testing.TB, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber, _ = rand.Int(rand.Reader, big.NewInt(1<<62))
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// serverCert returns a certificate for 127.0.0.1.
func (ca *testCA) serverCert(t testing.TB) tls.Certificate {
	key, cert := issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "zkserver test server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// clientCert returns a client certificate with the given subject.
func (ca *testCA) clientCert(t testing.TB, subject pkix.Name) tls.Certificate {
	key, cert := issue(t, &x509.Certificate{
		Subject:     subject,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// dialRawTLS opens a session over TLS.
func dialRawTLS(t testing.TB, addr string, cfg *tls.Config) (*rawClient, error) {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawClient{t: t, nc: nc}
	req := jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)}
	e := jute.NewFrameEncoder()
	req.Encode(e)
	if _, err := nc.Write(e.Frame()); err != nil {
		return nil, err
	}
	p, err := jute.ReadFrame(nc, 1<<20)
	if err != nil {
		return nil, err
	}
	var resp jute.ConnectResponse
	resp.Decode(jute.NewDecoder(p))
	c.id, c.passwd, c.timeout = resp.SessionID, resp.Passwd, resp.TimeOut
	return c, nil
}

func whoAmI(t testing.TB, c *rawClient) []string {
	t.Helper()
	f := c.call(jute.Request{Op: jute.OpWhoAmI})
	d := jute.NewDecoder(f.body)
	var ids []string
	for range d.VectorLen(8) {
		ids = append(ids, d.String()+":"+d.String())
	}
	return ids
}

// tlsServer starts zkserver with a secure port that requires client
// certificates signed by ca.
func tlsServer(t testing.TB, ca *testCA, plain string) *zkserver.Server {
	t.Helper()
	s := zkserver.NewServer(zkserver.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{ca.serverCert(t)},
		ClientCAs:    ca.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}})
	if err := s.Start(plain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

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

func readAll(nc net.Conn) (string, error) {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), err
		}
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
