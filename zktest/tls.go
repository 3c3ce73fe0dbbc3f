package zktest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// TLSClientID is the subject of the client certificate that ClientTLS
// presents. ZooKeeper authenticates a session that connects with it under
// the x509 scheme with this id, so the ACL x509:CN=zktest-client grants
// access to it.
const TLSClientID = "CN=zktest-client"

// TLSFiles names the PEM files of a cluster started with Options.TLS, for
// clients that take files rather than a *tls.Config. They live in the
// cluster's temporary directory and are removed by Close.
type TLSFiles struct {
	CA   string // the certificate of the CA that signed the server and client certificates
	Cert string // the client certificate (subject TLSClientID)
	Key  string // the client certificate's private key, unencrypted PKCS#8 ("PRIVATE KEY")
}

// tlsMaterial is a cluster's throwaway CA and the certificates it signed.
type tlsMaterial struct {
	files    TLSFiles
	keyStore string // the server certificate and its key in one file: ZooKeeper's PEM key store
	roots    *x509.CertPool
	client   tls.Certificate
}

// tlsValidity is how long the generated certificates are valid. They are
// deleted with the cluster, so long enough for any test run will do; they
// are back-dated an hour against clock skew between Go and the JVM.
const tlsValidity = 365 * 24 * time.Hour

// newTLSMaterial creates a CA, a server certificate for 127.0.0.1,
// ::1 and localhost, and a client certificate, all with ECDSA P-256 keys,
// and writes them as PEM files into dir. ZooKeeper's PEM reader takes
// certificates and unencrypted PKCS#8 keys (RSA, EC or DSA), and a key
// store that is one file holding the certificate and its key.
func newTLSMaterial(dir string) (*tlsMaterial, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("zktest: tls: %w", err)
	}
	caKey, caCert, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "zktest CA"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	serverKey, serverCert, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "zktest server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
	if err != nil {
		return nil, err
	}
	clientKey, clientCert, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "zktest-client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	if err != nil {
		return nil, err
	}

	t := &tlsMaterial{
		files: TLSFiles{
			CA:   filepath.Join(dir, "ca.pem"),
			Cert: filepath.Join(dir, "client.pem"),
			Key:  filepath.Join(dir, "client-key.pem"),
		},
		keyStore: filepath.Join(dir, "server.pem"),
		roots:    x509.NewCertPool(),
	}
	t.roots.AddCert(caCert)
	serverKeyPEM, err := keyPEM(serverKey)
	if err != nil {
		return nil, err
	}
	clientKeyPEM, err := keyPEM(clientKey)
	if err != nil {
		return nil, err
	}
	clientCertPEM := certPEM(clientCert)
	for _, f := range []struct {
		name string
		data []byte
		perm os.FileMode
	}{
		{t.files.CA, certPEM(caCert), 0o644},
		{t.files.Cert, clientCertPEM, 0o644},
		{t.files.Key, clientKeyPEM, 0o600},
		{t.keyStore, append(certPEM(serverCert), serverKeyPEM...), 0o600},
	} {
		if err := os.WriteFile(f.name, f.data, f.perm); err != nil {
			return nil, fmt.Errorf("zktest: tls: %w", err)
		}
	}
	if t.client, err = tls.X509KeyPair(clientCertPEM, clientKeyPEM); err != nil {
		return nil, fmt.Errorf("zktest: tls: client key pair: %w", err)
	}
	return t, nil
}

// newCert creates a key and a certificate from template, valid from an
// hour ago for tlsValidity, signed by parent with parentKey, or
// self-signed if parent is nil.
func newCert(template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	now := time.Now()
	template.NotBefore, template.NotAfter = now.Add(-time.Hour), now.Add(tlsValidity)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("zktest: tls: %w", err)
	}
	if template.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, fmt.Errorf("zktest: tls: %w", err)
	}
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("zktest: tls: certificate %q: %w", template.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("zktest: tls: %w", err)
	}
	return key, cert, nil
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("zktest: tls: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// clientConfig returns a new client configuration that trusts the CA and
// presents the client certificate.
func (t *tlsMaterial) clientConfig() *tls.Config {
	return &tls.Config{
		RootCAs:      t.roots.Clone(),
		Certificates: []tls.Certificate{t.client},
		ServerName:   "127.0.0.1", // an IP SAN of the server certificate
		MinVersion:   tls.VersionTLS12,
	}
}

// tlsConfigLines writes the zoo.cfg lines that make m serve its secure
// client port with t's server certificate. ZooKeeper turns the keys it
// does not parse itself (serverCnxnFactory, ssl.*) into the system
// properties zookeeper.<key>, which is where its connection factory and
// TLS code read them.
func tlsConfigLines(line func(string, ...any), m *member, t *tlsMaterial) {
	// Only Netty's connection factory speaks TLS; it serves the plain
	// client port too.
	line("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory")
	line("secureClientPort=%d", m.securePort)
	line("secureClientPortAddress=127.0.0.1")
	line("ssl.keyStore.location=%s", t.keyStore)
	line("ssl.keyStore.type=PEM")
	line("ssl.trustStore.location=%s", t.files.CA)
	line("ssl.trustStore.type=PEM")
	// A client without a certificate signed by the CA is refused in
	// the TLS handshake.
	line("ssl.clientAuth=need")
	// With a secure client port, ZooKeeper registers the x509
	// authentication provider itself (authProvider.x509, unless
	// ssl.authProvider names another), which authenticates each TLS
	// session as x509:<subject of the client certificate>.
}

func (m *member) secureAddr() string {
	return "127.0.0.1:" + strconv.Itoa(m.securePort)
}

// checkSecure makes a TLS handshake with the client certificate on m's
// secure port, which proves that the port is bound and that ZooKeeper
// loaded its key store and trust store (Netty loads them on the first
// connection).
func (c *Cluster) checkSecure(ctx context.Context, m *member) error {
	conn, done, err := dial(ctx, m.secureAddr())
	if err != nil {
		return fmt.Errorf("secure port: %w", err)
	}
	defer done()
	tc := tls.Client(conn, c.tls.clientConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("secure port %s: TLS handshake: %w", m.secureAddr(), err)
	}
	// TLS 1.3 lets the client finish before the server has checked its
	// certificate; a refusal would arrive with the first read. ZooKeeper
	// sends nothing before a request, so a short read deadline that
	// expires means the connection was accepted.
	tc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := tc.Read(make([]byte, 1)); err != nil {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return fmt.Errorf("secure port %s: after TLS handshake: %w", m.secureAddr(), err)
	}
	return nil
}

func (c *Cluster) mustTLS(method string) *tlsMaterial {
	if c.tls == nil {
		panic("zktest: " + method + ": the cluster was started without Options.TLS")
	}
	return c.tls
}

// SecureAddrs returns the TLS client addresses ("127.0.0.1:port") of all
// members in index order, like Addrs. The slice is a copy. It panics if
// the cluster was started without Options.TLS.
func (c *Cluster) SecureAddrs() []string {
	c.mustTLS("SecureAddrs")
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, len(c.members))
	for i, m := range c.members {
		addrs[i] = m.secureAddr()
	}
	return addrs
}

// SecureAddr returns the TLS client address ("127.0.0.1:port") of member
// i. It stays the same across Stop, Kill and Restart. It panics if the
// cluster was started without Options.TLS.
func (c *Cluster) SecureAddr(i int) string {
	c.mustTLS("SecureAddr")
	return c.member(i).secureAddr()
}

// ClientTLS returns a new client configuration for the secure ports: it
// trusts only the cluster's CA, presents the client certificate (subject
// TLSClientID) and verifies the server as 127.0.0.1 (the server
// certificate also names localhost and ::1). Each call returns a fresh
// copy; set Certificates to nil for a client that the server must refuse.
// It panics if the cluster was started without Options.TLS.
func (c *Cluster) ClientTLS() *tls.Config {
	return c.mustTLS("ClientTLS").clientConfig()
}

// TLSFiles returns the paths of the CA certificate and the client
// certificate and key, as PEM files. It panics if the cluster was started
// without Options.TLS.
func (c *Cluster) TLSFiles() TLSFiles {
	return c.mustTLS("TLSFiles").files
}
