package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// zkr server runs zkserver: other zkr commands (and any client) use it; a
// SIGTERM stops it cleanly.
func TestServer(t *testing.T) {
	srv, addrs := startServer(t, 1, "--addr", "127.0.0.1:0", "--tick", "100ms")
	addr := addrs[0]
	env := []string{"ZKR_SERVERS=" + addr}
	if r := start(t, env, "lock", "--id", "on-zkserver", "/srv/lock", "--", "sh", "-c", `test -n "$ZKR_FENCING_TOKEN"`); r.wait(30*time.Second) != 0 {
		t.Fatalf("zkr lock on zkr server: stderr:\n%s", r.stderr.String())
	}
	if r := zkr(t, "inspect", "--servers", addr, "/srv/lock"); r.code != 0 {
		t.Errorf("zkr inspect on zkr server: exit %d: %s", r.code, r.stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Errorf("zkr server after SIGTERM: exit %d; stderr:\n%s", code, srv.stderr.String())
	}
	if r := zkr(t, "server", "--tick", "0s"); r.code != exitUsage {
		t.Errorf("--tick 0s: exit %d, want %d", r.code, exitUsage)
	}
}

// zkr server --data-dir keeps the tree across a restart of the process.
func TestServerDataDir(t *testing.T) {
	dir := t.TempDir()
	run := func() (*proc, string) {
		srv, addrs := startServer(t, 1, "--addr", "127.0.0.1:0", "--tick", "100ms", "--data-dir", dir)
		return srv, addrs[0]
	}
	exists := func(addr string) bool {
		r := zkr(t, "inspect", "--servers", addr, "--json", "/kept/lock")
		if r.code != 0 {
			t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
		}
		var in inspection
		if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
		}
		return in.Exists
	}
	srv, addr := run()
	if r := zkr(t, "lock", "--servers", addr, "/kept/lock", "--", "true"); r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.stderr)
	}
	if !exists(addr) {
		t.Fatal("the lock's parent does not exist after locking")
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Fatalf("zkr server: exit %d", code)
	}
	srv, addr = run()
	if !exists(addr) {
		t.Error("the lock's parent did not survive a restart with --data-dir")
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.wait(10 * time.Second)
}

// writeServerTLS writes a CA, a server certificate for 127.0.0.1 and a
// client certificate (subject CN=zkr-test,O=Example) signed by it, as PEM
// files in dir.
func writeServerTLS(t *testing.T, dir string) (ca, cert, key, clientCert, clientKey string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zkr test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, blk := range blocks {
			b = append(b, pem.EncodeToMemory(blk)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, tmpl *x509.Certificate, name string) (string, string) {
		k := newKey()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalPKCS8PrivateKey(k)
		return write(name+".pem", &pem.Block{Type: "CERTIFICATE", Bytes: der}),
			write(name+"-key.pem", &pem.Block{Type: "PRIVATE KEY", Bytes: kb})
	}
	ca = write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	cert, key = leaf(2, &x509.Certificate{
		Subject: pkix.Name{CommonName: "zkr test server"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, "server")
	clientCert, clientKey = leaf(3, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "zkr-test", Organization: []string{"Example"}},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, "client")
	return ca, cert, key, clientCert, clientKey
}

// zkr server --tls-cert/--tls-key/--tls-ca serves TLS clients with client
// certificates, which authenticate under the x509 scheme; zkr itself
// connects to it over TLS.
func TestServerTLS(t *testing.T) {
	ca, cert, key, clientCert, clientKey := writeServerTLS(t, t.TempDir())
	srv, addrs := startServer(t, 2, "--addr", "127.0.0.1:0", "--secure-addr", "127.0.0.1:0", "--tick", "100ms",
		"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca)
	plain, secure := addrs[0], addrs[1]
	tlsArgs := []string{"--servers", secure, "--tls-ca", ca, "--tls-cert", clientCert, "--tls-key", clientKey}
	if r := zkr(t, append(tlsArgs, "lock", "/srv/tls", "--", "true")...); r.code != 0 {
		t.Fatalf("zkr lock over TLS: exit %d: %s", r.code, r.stderr)
	}
	// The session is x509:<subject>, and an x509 ACL lets only it in.
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(ca)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	c := client(t, []string{secure}, zkclient.WithTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1"}))
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	ids, err := c.WhoAmI(ctx)
	if err != nil || fmt.Sprint(ids) != "[{x509 CN=zkr-test,O=Example} {ip 127.0.0.1}]" {
		t.Fatalf("whoAmI over TLS: %v %v", ids, err)
	}
	if _, err := c.Create(ctx, "/srv/x509", []byte("s"), zkclient.Persistent,
		[]zkclient.ACL{{Perms: zkclient.PermAll, Scheme: "x509", ID: "CN=zkr-test,O=Example"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client(t, []string{plain}).Get(ctx, "/srv/x509"); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Fatalf("a plain client reads the x509 node: %v", err)
	}
	// Without a client certificate: no session (a failed TLS handshake).
	if r := zkr(t, "--servers", secure, "--tls-ca", ca, "--connect-timeout", "2s", "inspect", "/srv/tls"); r.code != exitConnect {
		t.Errorf("zkr without a client certificate: exit %d, want %d: %s", r.code, exitConnect, r.stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Errorf("zkr server after SIGTERM: exit %d; stderr:\n%s", code, srv.stderr.String())
	}

	// TLS only; bad TLS settings are bad input.
	_, addrs = startServer(t, 1, "--addr", "", "--secure-addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	onlyAddr := addrs[0]
	if r := zkr(t, "--servers", onlyAddr, "--tls-ca", ca, "lock", "/srv/tls-only", "--", "true"); r.code != 0 {
		t.Fatalf("zkr lock on a TLS-only server without client certificates: exit %d: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--tls-ca", ca},
		{"--tls-cert", cert},
		{"--tls-cert", cert, "--tls-key", filepath.Join(t.TempDir(), "missing.pem")},
		{"--tls-cert", cert, "--tls-key", key, "--tls-ca", key},
		{"--addr", ""},
	} {
		if r := zkr(t, append([]string{"server", "--secure-addr", "127.0.0.1:0"}, args...)...); r.code != exitUsage {
			t.Errorf("zkr server %q: exit %d, want %d: %s", args, r.code, exitUsage, r.stderr)
		}
	}
}
