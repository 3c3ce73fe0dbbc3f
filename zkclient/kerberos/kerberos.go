// Package kerberos logs zkclient sessions in to ZooKeeper with Kerberos:
// SASL GSSAPI (Kerberos 5, RFC 4752) on the gokrb5 library, the mechanism
// ZooKeeper serves when its JAAS Server section logs in a Kerberos
// principal.
//
//	cl := client.NewWithKeytab("app", "EXAMPLE.COM", kt, krb5conf)
//	defer cl.Destroy()
//	c, err := zkclient.Connect(ctx, servers, zkclient.WithSASL(kerberos.GSSAPI(cl)))
//
// [GSSAPI] turns a logged-in gokrb5 client into a mechanism for
// [github.com/zkrecipes/zkrecipes/zkclient.WithSASL]; the same option
// serves the recipes' sessions through
// [github.com/zkrecipes/zkrecipes.WithClientOptions]. The package's example logs in
// from a keytab (it needs a KDC, so it is compiled, not run).
//
// It lives in a module of its own so that only programs using Kerberos
// download and link gokrb5.
package kerberos

import (
	"context"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/krberror"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Option configures the mechanism.
type Option func(*mechanism)

// WithService sets the service name of the server's principal (default
// "zookeeper", as ZooKeeper's zookeeper.sasl.client.username).
func WithService(name string) Option { return func(m *mechanism) { m.service = name } }

// WithServiceHost sets the host part of the server's principal for every
// server, instead of each server's own (see GSSAPI).
func WithServiceHost(host string) Option { return func(m *mechanism) { m.host = host } }

type mechanism struct {
	cl      *client.Client
	service string
	host    string
	lookup  func(ctx context.Context, addr string) ([]string, error)
}

// GSSAPI returns the SASL GSSAPI mechanism authenticating as the gokrb5
// client cl (made from a keytab, a password or a credentials cache; it logs
// in when first needed). Each connection asks cl for a ticket to the
// server's principal, service/host@realm: "zookeeper/" and the host of the
// server's address; an IP address is turned into its name by a reverse
// lookup, as ZooKeeper's Java client does by default (it canonicalizes
// every host name; this mechanism does not resolve names), and the realm
// is the one krb5.conf maps the host to. The exchange authenticates both
// sides (the server's AP-REP is checked), then agrees on no security
// layer, as ZooKeeper does: what follows is neither signed nor encrypted
// (use TLS for that). The session is then known as
// sasl:<the server's mapping of the principal> (ZooKeeper 3.8 keeps
// "user@REALM" by default). It costs three round trips per connection, and
// a KDC round trip when cl has no ticket for the server yet.
//
// A KDC out of reach fails the connection attempt (the client tries again);
// a KDC's refusal (unknown principal, wrong password) ends the session as
// AuthFailed. gokrb5 takes no context: a request to the KDC is bounded by
// its own timeouts (a few seconds per KDC), not by the connect timeout.
// cl may be shared by several Clients; call cl.Destroy only once they are
// closed.
func GSSAPI(cl *client.Client, opts ...Option) zkclient.SASLMechanism {
	m := &mechanism{cl: cl, service: "zookeeper", lookup: net.DefaultResolver.LookupAddr}
	for _, o := range opts {
		o(m)
	}
	return m
}

func (m *mechanism) Name() string { return "GSSAPI" }

// GSS-API's mechanism identifier of Kerberos 5 and the token ids of RFC
// 4121.
var (
	krb5OID  = asn1.ObjectIdentifier{1, 2, 840, 113554, 1, 2, 2}
	tokAPReq = []byte{0x01, 0x00}
)

// Flags of RFC 4121 wrap tokens.
const (
	sentByAcceptor = 0x01
	sealed         = 0x02
	acceptorSubkey = 0x04
)

// Start gets a ticket for the server and returns the initial context
// token: an AP-REQ asking for mutual authentication.
func (m *mechanism) Start(ctx context.Context, server string) (zkclient.SASLExchange, []byte, error) {
	host := m.host
	if host == "" {
		var err error
		if host, err = m.serverHost(ctx, server); err != nil {
			return nil, nil, err
		}
	}
	spn := m.service + "/" + host
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	// gokrb5 takes no context; it logs in first if need be.
	tkt, key, err := m.cl.GetServiceTicket(spn)
	if err != nil {
		var ke krberror.Krberror
		if errors.As(err, &ke) && ke.RootCause == krberror.NetworkingError {
			// The KDC is out of reach: this connection fails, the next
			// attempt asks again.
			return nil, nil, fmt.Errorf("kerberos: ticket for %s: %w", spn, err)
		}
		return nil, nil, fmt.Errorf("%w: kerberos: ticket for %s: %w", zkclient.ErrAuthFailed, spn, err)
	}
	auth, err := types.NewAuthenticator(m.cl.Credentials.Domain(), m.cl.Credentials.CName())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: kerberos: %w", zkclient.ErrAuthFailed, err)
	}
	auth.Cksum = types.Checksum{CksumType: chksumtype.GSSAPI, Checksum: gssChecksum(gssapi.ContextFlagMutual | gssapi.ContextFlagInteg)}
	req, err := messages.NewAPReq(tkt, key, auth)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: kerberos: AP-REQ: %w", zkclient.ErrAuthFailed, err)
	}
	types.SetFlag(&req.APOptions, flags.APOptionMutualRequired)
	b, err := req.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: kerberos: AP-REQ: %w", zkclient.ErrAuthFailed, err)
	}
	oid, _ := asn1.Marshal(krb5OID)
	token := asn1tools.AddASNAppTag(append(append(oid, tokAPReq...), b...), 0)
	x := &exchange{m: m, spn: spn, key: key, auth: auth}
	return x, token, nil
}

// serverHost returns the host of server ("host:port") for its principal.
func (m *mechanism) serverHost(ctx context.Context, server string) (string, error) {
	host, _, err := net.SplitHostPort(server)
	if err != nil {
		host = server
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return host, nil
	}
	names, err := m.lookup(ctx, host)
	if err != nil || len(names) == 0 {
		return "", fmt.Errorf("%w: kerberos: no host name for %s to name the server's principal by (see WithServiceHost): %v", zkclient.ErrAuthFailed, host, err)
	}
	return strings.TrimSuffix(names[0], "."), nil
}

// gssChecksum is the authenticator checksum of RFC 4121 4.1.1: no channel
// bindings, the context flags.
func gssChecksum(flags uint32) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:4], 16)
	binary.LittleEndian.PutUint32(b[20:24], flags)
	return b
}

// exchange is the rest of the GSSAPI exchange on one connection.
type exchange struct {
	m    *mechanism
	spn  string
	key  types.EncryptionKey // the ticket's session key
	auth types.Authenticator

	established bool
	subkey      *types.EncryptionKey // the acceptor's, from the AP-REP
	serverSeq   int64                // the acceptor's initial sequence number, from the AP-REP (0: none)
}

// Next checks the server's AP-REP (and answers with an empty token, as
// RFC 4752 has the client do once the context is established), then
// answers the server's wrapped security layer offer with "no layer" and
// the client's principal as authorization id, which ends the exchange.
func (x *exchange) Next(challenge []byte) ([]byte, bool, error) {
	if !x.established {
		if err := x.checkAPRep(challenge); err != nil {
			return nil, false, err
		}
		x.established = true
		return []byte{}, false, nil
	}
	offer, err := x.unwrap(challenge)
	if err != nil {
		return nil, false, err
	}
	if len(offer) != 4 {
		return nil, false, fmt.Errorf("kerberos: security layer offer of %d bytes, want 4", len(offer))
	}
	if offer[0]&1 == 0 {
		return nil, false, fmt.Errorf("kerberos: the server requires a security layer (offer %#x); only none is supported", offer[0])
	}
	answer := append([]byte{1, 0, 0, 0}, x.m.cl.Credentials.CName().PrincipalNameString()+"@"+x.m.cl.Credentials.Domain()...)
	token, err := x.wrap(answer)
	if err != nil {
		return nil, false, err
	}
	return token, true, nil
}

// checkAPRep verifies the server's AP-REP: it decrypts with the session
// key and echoes our authenticator's time, which only the holder of the
// service's key can do.
func (x *exchange) checkAPRep(b []byte) error {
	var tok spnego.KRB5Token
	if err := tok.Unmarshal(b); err != nil {
		return fmt.Errorf("kerberos: the server's first token: %w", err)
	}
	switch {
	case tok.IsKRBError():
		return fmt.Errorf("kerberos: the server refused the ticket for %s: %s", x.spn, tok.KRBError.Error())
	case !tok.IsAPRep():
		return errors.New("kerberos: the server's first token is not an AP-REP")
	}
	plain, err := crypto.DecryptEncPart(tok.APRep.EncPart, x.key, keyusage.AP_REP_ENCPART)
	if err != nil {
		return fmt.Errorf("kerberos: the server's AP-REP does not decrypt with the session key: %w", err)
	}
	var enc messages.EncAPRepPart
	if err := enc.Unmarshal(plain); err != nil {
		return fmt.Errorf("kerberos: AP-REP: %w", err)
	}
	if enc.CTime.Unix() != x.auth.CTime.Unix() || enc.Cusec != x.auth.Cusec {
		return errors.New("kerberos: the server's AP-REP does not answer our authenticator")
	}
	if enc.Subkey.KeyType != 0 {
		x.subkey = &enc.Subkey
	}
	x.serverSeq = enc.SequenceNumber
	return nil
}

// unwrap verifies a wrap token of the server (integrity only) and returns
// its payload.
func (x *exchange) unwrap(b []byte) ([]byte, error) {
	if len(b) < gssapi.HdrLen {
		return nil, fmt.Errorf("kerberos: wrap token of %d bytes", len(b))
	}
	if rrc := int(binary.BigEndian.Uint16(b[6:8])); rrc != 0 && len(b) > gssapi.HdrLen {
		// Undo the right rotation of what follows the header.
		data := b[gssapi.HdrLen:]
		rrc %= len(data)
		b = append(append(append([]byte(nil), b[:gssapi.HdrLen]...), data[rrc:]...), data[:rrc]...)
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(b, true); err != nil {
		return nil, fmt.Errorf("kerberos: the server's wrap token: %w", err)
	}
	if wt.Flags&sealed != 0 {
		return nil, errors.New("kerberos: the server encrypted its security layer offer; only integrity-protected tokens are supported")
	}
	key, err := x.keyFor(wt.Flags)
	if err != nil {
		return nil, err
	}
	if ok, err := wt.Verify(key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return nil, fmt.Errorf("kerberos: the server's wrap token: %w", err)
	}
	if x.serverSeq != 0 && wt.SndSeqNum != uint64(x.serverSeq) {
		return nil, fmt.Errorf("kerberos: the server's wrap token has sequence number %d, not the %d its AP-REP announced", wt.SndSeqNum, x.serverSeq)
	}
	return wt.Payload, nil
}

// keyFor returns the key a token with flags uses: the acceptor's subkey
// when flagged, else the session key (we send no subkey of our own).
func (x *exchange) keyFor(flags byte) (types.EncryptionKey, error) {
	if flags&acceptorSubkey == 0 {
		return x.key, nil
	}
	if x.subkey == nil {
		return types.EncryptionKey{}, errors.New("kerberos: a wrap token under an acceptor subkey the AP-REP did not carry")
	}
	return *x.subkey, nil
}

// wrap makes an integrity-protected wrap token of ours, under the key the
// server uses and with our initial sequence number.
func (x *exchange) wrap(payload []byte) ([]byte, error) {
	var f byte
	key := x.key
	if x.subkey != nil {
		f, key = acceptorSubkey, *x.subkey
	}
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: %w", err)
	}
	wt := gssapi.WrapToken{
		Flags:     f,
		EC:        uint16(et.GetHMACBitLength() / 8),
		SndSeqNum: uint64(x.auth.SeqNumber),
		Payload:   payload,
	}
	if err := wt.SetCheckSum(key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		return nil, fmt.Errorf("kerberos: %w", err)
	}
	return wt.Marshal()
}
