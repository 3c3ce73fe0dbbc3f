package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// tlsConnect opens a ZooKeeper session over TLS with cfg: the TLS
// handshake, then the ConnectRequest. The connection is closed when the
// test ends.
func tlsConnect(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, session, error) {
	t.Helper()
	d := &net.Dialer{Timeout: Bound(5 * time.Second)}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, session{}, fmt.Errorf("TLS handshake: %w", err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(Bound(10 * time.Second)))
	s, err := handshake(conn, 0, nil, 30000)
	if err != nil {
		return conn, s, fmt.Errorf("ZooKeeper handshake: %w", err)
	}
	return conn, s, nil
}

// mustTLSSession opens a session over TLS and fails the test unless the
// server grants one.
func mustTLSSession(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	conn, s, err := tlsConnect(t, addr, cfg)
	if err != nil {
		t.Fatalf("session over TLS to %s: %v", addr, err)
	}
	if s.id == 0 || len(s.passwd) == 0 || s.timeout <= 0 {
		t.Fatalf("session over TLS to %s: id %x, password %x, timeout %d", addr, s.id, s.passwd, s.timeout)
	}
	return conn
}

// whoAmI asks the server which identities the session on conn has, as
// "scheme:id" strings.
func whoAmI(t *testing.T, conn net.Conn) []string {
	t.Helper()
	e := jute.NewFrameEncoder()
	e.Int32(1) // xid
	e.Int32(jute.OpWhoAmI)
	if _, err := conn.Write(e.Frame()); err != nil {
		t.Fatalf("whoami: %v", err)
	}
	body, err := readReply(conn, 1)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	d := jute.NewDecoder(body)
	var ids []string
	for range d.VectorLen(8) {
		scheme := d.String()
		ids = append(ids, scheme+":"+d.String())
	}
	if d.Err() != nil {
		t.Fatalf("whoami reply: %v", d.Err())
	}
	return ids
}

// caOnlyTLS builds, from the CA file alone, a configuration that trusts
// the server but has no client certificate.
func caOnlyTLS(t *testing.T, files TLSFiles) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", files.CA)
	}
	return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

// refused checks that a session over TLS with cfg is not granted.
func refused(t *testing.T, addr string, cfg *tls.Config, what string) {
	t.Helper()
	_, s, err := tlsConnect(t, addr, cfg)
	if err == nil {
		t.Fatalf("%s: got session %x", what, s.id)
	}
	t.Logf("%s: %v", what, err)
}

func TestTLSStandalone(t *testing.T) {
	checkLeaks(t)
	c := StartT(t, Options{TLS: true})
	if c.emb != nil {
		t.Fatal("a TLS cluster runs the embedded server")
	}
	addrs := c.SecureAddrs()
	if len(addrs) != 1 || addrs[0] != c.SecureAddr(0) || !strings.HasPrefix(addrs[0], "127.0.0.1:") || addrs[0] == c.Addr(0) {
		t.Fatalf("SecureAddrs = %v, SecureAddr(0) = %v, Addr(0) = %v", addrs, c.SecureAddr(0), c.Addr(0))
	}
	addr := addrs[0]

	conn := mustTLSSession(t, addr, c.ClientTLS())
	if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Errorf("TLS version %x", v)
	}
	if ids := whoAmI(t, conn); !slices.Contains(ids, "x509:"+TLSClientID) {
		t.Errorf("whoami over TLS = %v, want x509:%s among them", ids, TLSClientID)
	}

	// The files give a command-line client the same identity.
	files := c.TLSFiles()
	fromFiles := caOnlyTLS(t, files)
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	fromFiles.Certificates = []tls.Certificate{cert}
	mustTLSSession(t, addr, fromFiles)

	// ClientTLS hands out copies.
	noCert := c.ClientTLS()
	noCert.Certificates = nil
	if len(c.ClientTLS().Certificates) != 1 {
		t.Fatal("changing one ClientTLS changed the next")
	}

	refused(t, addr, noCert, "without a client certificate")
	refused(t, addr, caOnlyTLS(t, files), "without a client certificate, from the CA file")
	foreign := c.ClientTLS()
	foreign.Certificates = newTestMaterial(t).clientConfig().Certificates
	refused(t, addr, foreign, "with a client certificate of another CA")
	trustsNothing := c.ClientTLS()
	trustsNothing.RootCAs = x509.NewCertPool()
	refused(t, addr, trustsNothing, "not trusting the CA")

	// A plain ZooKeeper handshake on the secure port fails...
	plain, err := net.DialTimeout("tcp", addr, Bound(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(Bound(10 * time.Second)))
	if s, err := handshake(plain, 0, nil, 30000); err == nil {
		t.Fatalf("plain handshake on the secure port got session %x", s.id)
	} else {
		t.Logf("plain handshake on the secure port: %v", err)
	}
	// ... and succeeds on the plain port, which stays.
	if s := rawConnect(t, c.Addr(0), 0, nil); s.id == 0 {
		t.Fatal("no session on the plain port")
	}

	// Same port, same certificates after Stop and Restart.
	ctx := testContext(t)
	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tlsConnect(t, addr, c.ClientTLS()); err == nil {
		t.Fatal("session over TLS to a stopped server")
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if c.SecureAddr(0) != addr || c.TLSFiles() != files {
		t.Fatalf("after Restart: %s, %+v; before: %s, %+v", c.SecureAddr(0), c.TLSFiles(), addr, files)
	}
	mustTLSSession(t, addr, fromFiles)
	refused(t, addr, noCert, "without a client certificate, after Restart")
}

func TestTLSEnsemble(t *testing.T) {
	checkLeaks(t)
	c := StartT(t, Options{Servers: 3, TLS: true})
	addrs := c.SecureAddrs()
	if len(addrs) != 3 {
		t.Fatalf("SecureAddrs = %v", addrs)
	}
	for i, addr := range addrs {
		if addr != c.SecureAddr(i) || slices.Contains(c.Addrs(), addr) {
			t.Fatalf("SecureAddrs = %v, Addrs = %v", addrs, c.Addrs())
		}
		mustTLSSession(t, addr, c.ClientTLS())
	}
	refused(t, addrs[2], caOnlyTLS(t, c.TLSFiles()), "without a client certificate")

	// Kill the leader: a quorum is left, and the two others elect a
	// leader, closing connections until they have.
	ctx := testContext(t)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	other := (leader + 1) % 3
	Eventually(t, 20*time.Second, "a session over TLS after the leader is killed", func() error {
		conn, _, err := tlsConnect(t, addrs[other], c.ClientTLS())
		if conn != nil {
			conn.Close()
		}
		return err
	})
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	mustTLSSession(t, c.SecureAddr(leader), c.ClientTLS())
}

// newTestMaterial makes certificates of another, unrelated CA.
func newTestMaterial(t *testing.T) *tlsMaterial {
	t.Helper()
	m, err := newTLSMaterial(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTLSMaterial(t *testing.T) {
	m := newTestMaterial(t)
	for _, name := range []string{m.files.CA, m.files.Cert, m.files.Key, m.keyStore} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "EC PRIVATE KEY") {
			t.Errorf("%s has a SEC 1 key; ZooKeeper's PEM reader wants PKCS#8", name)
		}
	}
	ks, err := os.ReadFile(m.keyStore)
	if err != nil {
		t.Fatal(err)
	}
	server, err := tls.X509KeyPair(ks, ks)
	if err != nil {
		t.Fatalf("key store: %v", err)
	}
	leaf, err := x509.ParseCertificate(server.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: m.roots}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	client, err := x509.ParseCertificate(m.client.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: m.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := client.Verify(opts); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if got := client.Subject.String(); got != TLSClientID {
		t.Errorf("client subject %q, want %q", got, TLSClientID)
	}
	if fi, err := os.Stat(m.files.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("client key file: %v, %v", fi.Mode(), err)
	}
}

func TestTLSNotEmbedded(t *testing.T) {
	t.Setenv(ServerEnv, "zkserver")
	if emb, err := useEmbedded(Options{Servers: 1, TLS: true}); err != nil || emb {
		t.Fatalf("useEmbedded with TLS under %s=zkserver = %v, %v", ServerEnv, emb, err)
	}
	if emb, _ := useEmbedded(Options{Servers: 1}); !emb {
		t.Fatalf("useEmbedded without TLS under %s=zkserver = false", ServerEnv)
	}
}

func TestTLSMethodsPanicWithoutTLS(t *testing.T) {
	c := &Cluster{members: []*member{{id: 1}}}
	for name, f := range map[string]func(){
		"SecureAddrs": func() { c.SecureAddrs() },
		"SecureAddr":  func() { c.SecureAddr(0) },
		"ClientTLS":   func() { c.ClientTLS() },
		"TLSFiles":    func() { c.TLSFiles() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Options.TLS") {
					t.Errorf("%s without TLS: recovered %v", name, r)
				}
			}()
			f()
		}()
	}
}
