package zkserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The TLS conformance cases compare a real ZooKeeper 3.8 with a secure
// client port (zktest Options.TLS: Netty, client certificates required)
// with zkserver configured alike: both trust zktest's CA for client
// certificates, and the same client certificate (subject
// zktest.TLSClientID) connects to both. Each pair is started on first use
// and shared by the package's TLS cases.

// tlsTarget is one of the two TLS servers under comparison.
type tlsTarget struct {
	name   string
	addr   string      // the plain client port
	secure string      // the secure client port
	client *tls.Config // trusts the server, presents the client certificate
	path   string
}

var (
	tlsOnce     sync.Once
	tlsReal     *zktest.Cluster
	tlsRealErr  error
	tlsEmbedded *zkserver.Server
	tlsEmbCfg   *tls.Config
	tlsSetupErr error
)

func closeTLSPair() {
	if tlsReal != nil {
		tlsReal.Close()
	}
	if tlsEmbedded != nil {
		tlsEmbedded.Close()
	}
}

// startTLSPair starts the two servers, once.
func startTLSPair(t *testing.T) {
	tlsOnce.Do(func() {
		if os.Getenv("ZKSERVER_NO_ZOOKEEPER") != "" {
			tlsRealErr = fmt.Errorf("ZKSERVER_NO_ZOOKEEPER is set")
			tlsSetupErr = tlsRealErr
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		tlsReal, tlsRealErr = zktest.Start(ctx, zktest.Options{TLS: true, Heap: "256m"})
		if tlsRealErr != nil {
			tlsSetupErr = tlsRealErr
			return
		}
		files := tlsReal.TLSFiles()
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			tlsSetupErr = err
			return
		}
		clientCAs := x509.NewCertPool()
		clientCAs.AppendCertsFromPEM(caPEM)
		client, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			tlsSetupErr = err
			return
		}
		ca := newTestCA(t)
		tlsEmbedded = zkserver.NewServer(zkserver.Options{TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.serverCert(t)},
			ClientCAs:    clientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		}})
		if tlsSetupErr = tlsEmbedded.Start("127.0.0.1:0"); tlsSetupErr != nil {
			return
		}
		tlsEmbCfg = &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1"}
	})
}

// conformTLS runs body against both TLS servers and compares the
// transcripts.
func conformTLS(t *testing.T, body func(t *testing.T, tg tlsTarget, r *rec)) {
	t.Helper()
	startTLSPair(t)
	if tlsSetupErr != nil && tlsRealErr == nil {
		t.Fatal(tlsSetupErr)
	}
	if tlsRealErr != nil {
		skipWithoutZooKeeper(t, tlsRealErr)
		return
	}
	path := casePath(t)
	targets := []tlsTarget{
		{name: "zookeeper", addr: tlsReal.Addr(0), secure: tlsReal.SecureAddr(0), client: tlsReal.ClientTLS(), path: path},
		{name: "zkserver", addr: tlsEmbedded.Addr(), secure: tlsEmbedded.SecureAddr(), client: tlsEmbCfg.Clone(), path: path},
	}
	var sides []side
	for _, tg := range targets {
		sides = append(sides, side{name: tg.name, addr: tg.addr, run: func(t *testing.T, r *rec) { body(t, tg, r) }})
	}
	compare(t, nil, sides)
}

// TestConformanceTLS: the x509 scheme. A session over TLS is
// authenticated as its certificate's subject (whoAmI, in ZooKeeper's
// order of identities), may create nodes with x509 ACLs (and auth ACLs,
// which take the subject), which a plain session cannot read; x509 ids
// must parse as distinguished names and match exactly; an x509 auth
// packet succeeds over TLS and fails on the plain port; a client without
// a certificate gets no session; the four-letter words answer on the
// secure port.
func TestConformanceTLS(t *testing.T) {
	conformTLS(t, func(t *testing.T, tg tlsTarget, r *rec) {
		p := tg.path
		x509ACL := func(id string) []jute.ACL {
			return []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: id}}}
		}
		a, err := dialRawTLS(t, tg.secure, tg.client)
		if err != nil {
			t.Fatal(err)
		}
		b := newRaw(t, tg.addr)
		r.session(a.id, "A")
		r.session(b.id, "B")
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.do(b, "B", jute.Request{Op: jute.OpWhoAmI})
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/x", Data: []byte("secret"), ACL: x509ACL(zktest.TLSClientID)})
		r.do(a, "A", getData(p+"/x", false))
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/x"})
		r.do(b, "B", getData(p+"/x", false))
		r.do(b, "B", jute.Request{Op: jute.OpGetACL, Path: p + "/x"})
		r.do(b, "B", jute.Request{Op: jute.OpCreate, Path: p + "/from-plain", ACL: x509ACL(zktest.TLSClientID)})
		r.do(a, "A", setData(p+"/from-plain", "mine too", -1))
		// Ids: a DN that does not parse, one that parses but does not
		// match (case), an empty one, several RDNs.
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/bad", ACL: x509ACL("not a dn")})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/lower", ACL: x509ACL("cn=zktest-client")})
		r.do(a, "A", getData(p+"/lower", false))
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/empty-dn", ACL: x509ACL("")})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/rdns", ACL: x509ACL("CN=a,OU=b+O=c;C=DE")})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/trailing", ACL: x509ACL("CN=a,")})
		// auth ACLs: the TLS session's x509 identity; with digest too.
		authACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth", ID: ""}}}
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/auth", ACL: authACL})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/auth"})
		r.do(b, "B", jute.Request{Op: jute.OpCreate, Path: p + "/auth-plain", ACL: authACL})
		r.do(a, "A", jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "digest", Auth: []byte("u:p")})
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		r.do(a, "A", jute.Request{Op: jute.OpCreate, Path: p + "/auth2", ACL: authACL})
		r.do(a, "A", jute.Request{Op: jute.OpGetACL, Path: p + "/auth2"})
		// The x509 auth packet: over TLS it authenticates the certificate
		// again, on the plain port it fails and ends the connection.
		r.do(a, "A", jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "x509", Auth: []byte("CN=someone-else")})
		r.do(a, "A", jute.Request{Op: jute.OpWhoAmI})
		c := newRaw(t, tg.addr)
		f := c.call(jute.Request{Op: jute.OpAuth, Xid: jute.XidAuth, Scheme: "x509", Auth: []byte(zktest.TLSClientID)})
		r.logf("x509 auth on the plain port: err=%d", f.hdr.Err)
		_, err = c.readFrame()
		r.logf("  then closed: %v", err != nil)
		// No client certificate: no session.
		noCert := tg.client.Clone()
		noCert.Certificates = nil
		nc, err := dialRawTLS(t, tg.secure, noCert)
		r.logf("no client certificate: session=%v", err == nil && nc.id != 0)
		// Four-letter words on the secure port.
		conn, err := tls.Dial("tcp", tg.secure, tg.client)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("conf"))
		conf, _ := readAll(conn)
		_, port, _ := net.SplitHostPort(tg.secure)
		r.logf("conf over TLS names the secure port: %v", strings.Contains(conf, "\nsecureClientPort="+port+"\n"))
		conn, err = tls.Dial("tcp", tg.secure, tg.client)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("ruok"))
		ruok, _ := readAll(conn)
		r.logf("ruok over TLS: %q", ruok)
		// With a secure port ZooKeeper runs Netty, on the plain port too:
		// dump lists no connections, cons shows the asking one as [1].
		dump, _ := flw(t, tg.addr, "dump")
		_, conns, _ := strings.Cut(dump, "Connections dump:\n")
		r.logf("dump's connections: %q", conns)
		cons, local := flw(t, tg.addr, "cons")
		for _, line := range strings.Split(cons, "\n") {
			if strings.HasPrefix(line, " /"+local+"[") {
				r.logf("cons lists the asking connection: %q", strings.TrimPrefix(line, " /"+local))
			}
		}
	})
}
