package zkserver

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// handshakeTimeout bounds a TLS handshake on the secure port.
const handshakeTimeout = 10 * time.Second

// handshake runs the TLS handshake of a connection on the secure port and
// authenticates it under the x509 scheme if the client presented a
// certificate the configuration verified. It reports whether the
// connection goes on.
func (s *Server) handshake(c *conn, tc *tls.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return false
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return true
	}
	name, err := x509Name(st.PeerCertificates[0].RawSubject)
	if err != nil {
		return false // ZooKeeper's provider fails, and closes the connection
	}
	s.mu.Lock()
	c.auth = append([]jute.ID{{Scheme: "x509", ID: name}}, c.auth...)
	s.mu.Unlock()
	return true
}
