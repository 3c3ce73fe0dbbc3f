package zkclient

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/digestmd5"
	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// SASLMechanism is a SASL mechanism the client authenticates with (see
// WithSASL). DigestMD5 returns one; Kerberos or a custom mechanism can
// be plugged in the same way.
type SASLMechanism interface {
	// Name returns the mechanism's name, for messages ("DIGEST-MD5").
	Name() string

	// Start begins one exchange on a new connection to server (its
	// "host:port") and returns it with the first token to send (empty,
	// not nil, when the server speaks first). ctx bounds the work Start
	// may do (asking a Kerberos KDC for a ticket). An error wrapping
	// ErrAuthFailed refuses for good: the session ends as AuthFailed.
	// Any other fails this connection attempt only, as a network failure
	// would, and the client tries again (a KDC out of reach).
	Start(ctx context.Context, server string) (SASLExchange, []byte, error)
}

// SASLExchange is one authentication exchange, on one connection.
type SASLExchange interface {
	// Next evaluates the server's token and returns the next token to
	// send. done reports that the exchange is complete on the client's
	// side: a non-nil token returned with it is sent as the last packet
	// (its answer is only checked for an error), a nil one ends the
	// exchange at once. An error ends it as a failure.
	Next(challenge []byte) (token []byte, done bool, err error)
}

// WithSASL authenticates every connection of the session with SASL, as
// ZooKeeper's Java client does with a JAAS Client section: right after
// the session handshake, before any other request (the watches to
// restore, the credentials of WithAuth, the caller's requests, pings), the
// client runs the exchange (opcode sasl, 102, with ordinary xids) and only
// then makes the connection available. The server then knows the session
// under its sasl scheme (SASLACL). A refusal (a wrong password, an
// unknown user) ends the session with StateAuthFailed and an error
// wrapping ErrAuthFailed; Connect returns it. The exchange costs a round
// trip per step (two for DIGEST-MD5) on every connection, and counts
// against the connect timeout.
//
// The server must be configured for SASL (a JAAS Server section and
// authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider);
// one that is not answers no challenge, which fails the session the same
// way. Given twice, the last mechanism wins.
func WithSASL(m SASLMechanism) Option { return func(c *config) { c.sasl = m } }

// SASLACL grants perms to the SASL identity user (scheme sasl), as a
// session authenticated with WithSASL is known.
func SASLACL(perms int32, user string) []ACL {
	return []ACL{{Perms: perms, Scheme: "sasl", ID: user}}
}

// DigestMD5 returns the DIGEST-MD5 mechanism for user and password, as
// ZooKeeper's JAAS configuration names them (the server's
// user_<name>="<password>"). It follows ZooKeeper's client: realm,
// service and host are ZooKeeper's fixed "zk-sasl-md5" and "zookeeper",
// quality of protection "auth" (authentication only: what follows is
// neither signed nor encrypted; use TLS for that), the user as the
// authorization id, and the server's own proof (rspauth) is checked.
func DigestMD5(user, password string) SASLMechanism {
	return digestMD5{user: user, password: password}
}

type digestMD5 struct{ user, password string }

func (digestMD5) Name() string { return "DIGEST-MD5" }

// Start returns an empty first token: in DIGEST-MD5 the server speaks
// first, with its challenge.
func (m digestMD5) Start(context.Context, string) (SASLExchange, []byte, error) {
	return &digestExchange{m: m}, []byte{}, nil
}

// digestExchange answers the server's challenge, then checks its
// rspauth.
type digestExchange struct {
	m       digestMD5
	p       digestmd5.Params
	replied bool
}

func (x *digestExchange) Next(challenge []byte) ([]byte, bool, error) {
	if x.replied {
		return nil, true, x.check(challenge)
	}
	resp, err := x.respond(challenge)
	if err != nil {
		return nil, false, err
	}
	x.replied = true
	return resp, false, nil
}

// respond builds the response to the server's challenge.
func (x *digestExchange) respond(challenge []byte) ([]byte, error) {
	if challenge == nil {
		return nil, errors.New("the server sent no challenge (is SASL configured on it?)")
	}
	ds, err := digestmd5.Parse(challenge)
	if err != nil {
		return nil, err
	}
	nonce, ok, err := digestmd5.Single(ds, "nonce")
	if err != nil || !ok || nonce == "" {
		return nil, fmt.Errorf("challenge without a nonce: %q", challenge)
	}
	if alg, _, _ := digestmd5.Single(ds, "algorithm"); alg != "md5-sess" {
		return nil, fmt.Errorf("challenge with algorithm %q, not md5-sess", alg)
	}
	qops := []string{"auth"} // the default when the server names none
	if q, ok, _ := digestmd5.Single(ds, "qop"); ok {
		qops = strings.Split(q, ",")
		for i := range qops {
			qops[i] = strings.TrimSpace(qops[i])
		}
	}
	if !slices.Contains(qops, "auth") {
		return nil, fmt.Errorf("the server requires qop %q; only auth is supported", qops)
	}
	cs, _, _ := digestmd5.Single(ds, "charset")
	utf8 := strings.EqualFold(cs, "utf-8")
	if !utf8 && !isASCII(x.m.user+x.m.password) {
		return nil, errors.New("the user name or password is not ASCII and the server did not offer UTF-8")
	}
	realm := "" // none offered: RFC 2831 lets the client use an empty one
	if realms := digestmd5.All(ds, "realm"); len(realms) > 0 {
		realm = realms[0] // as Java's client without a realm callback
	}
	var rnd [24]byte
	rand.Read(rnd[:])
	x.p = digestmd5.Params{
		User: x.m.user, Realm: realm, Password: x.m.password, Authzid: x.m.user,
		Nonce: nonce, Cnonce: base64.RawStdEncoding.EncodeToString(rnd[:]), NC: "00000001",
		Qop: "auth", DigestURI: digestmd5.DigestURI, UTF8: utf8,
	}
	proof, err := x.p.Response()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if utf8 {
		b.WriteString("charset=utf-8,")
	}
	fmt.Fprintf(&b, "username=%s,", digestmd5.Quote(x.p.User))
	if realm != "" {
		fmt.Fprintf(&b, "realm=%s,", digestmd5.Quote(realm))
	}
	fmt.Fprintf(&b, "nonce=%s,nc=%s,cnonce=%s,digest-uri=%s,maxbuf=65536,response=%s,qop=auth,authzid=%s",
		digestmd5.Quote(nonce), x.p.NC, digestmd5.Quote(x.p.Cnonce), digestmd5.Quote(x.p.DigestURI),
		proof, digestmd5.Quote(x.p.Authzid))
	return []byte(b.String()), nil
}

// check verifies the server's rspauth: a server that does not know the
// password cannot compute it.
func (x *digestExchange) check(final []byte) error {
	ds, err := digestmd5.Parse(final)
	if err != nil {
		return err
	}
	got, ok, err := digestmd5.Single(ds, "rspauth")
	if err != nil || !ok {
		return fmt.Errorf("the server's last message has no rspauth: %q", final)
	}
	want, err := x.p.RspAuth()
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errors.New("the server's rspauth is wrong: it does not know the password")
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// saslStart is a SASL exchange begun for one connection: the mechanism,
// the exchange and the first token.
type saslStart struct {
	m     SASLMechanism
	ex    SASLExchange
	token []byte
}

// startSASL begins m's exchange for a connection to addr. Its error is
// final (the session ends) if it wraps ErrAuthFailed.
func startSASL(ctx context.Context, m SASLMechanism, addr string) (saslStart, error) {
	ex, token, err := m.Start(ctx, addr)
	if err != nil {
		return saslStart{}, fmt.Errorf("SASL %s: %w", m.Name(), err)
	}
	return saslStart{m: m, ex: ex, token: token}, nil
}

// authenticateSASL runs the SASL exchange s on the connection, which
// nothing else uses yet: each token goes out as a sasl request with the
// next xid, and the server's answer (ReplyHeader, then its token) is read
// before anything else is sent. A refusal or a failed exchange is returned
// wrapping ErrAuthFailed; a broken connection or ctx's end as itself.
func (cn *conn) authenticateSASL(ctx context.Context, s saslStart) error {
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(time.Now()) })
	defer func() {
		stop()
		cn.nc.SetDeadline(time.Time{})
	}()
	m, ex, token := s.m, s.ex, s.token
	refused := func(format string, args ...any) error {
		return fmt.Errorf("%w: SASL %s: %s", ErrAuthFailed, m.Name(), fmt.Sprintf(format, args...))
	}
	for last := false; ; {
		reply, code, err := cn.saslRoundTrip(ctx, token)
		switch {
		case err != nil:
			return err
		case code == ErrAuthFailed && m.Name() == "DIGEST-MD5":
			return refused("%s refused the credentials (a wrong password or an unknown user)", cn.addr)
		case code == ErrAuthFailed:
			return refused("%s refused the credentials", cn.addr)
		case code == ErrSASLRequired:
			return fmt.Errorf("%w: %w", refused("%s refused the credentials", cn.addr), ErrSASLRequired)
		case code != 0:
			return refused("%s answered: %v", cn.addr, code)
		case last:
			return nil
		}
		if token, last, err = ex.Next(reply); err != nil {
			return refused("%v", err)
		}
		if last && token == nil {
			return nil
		}
	}
}

// saslRoundTrip sends token in a sasl request and returns the server's
// answer: its error code and, without error, its token.
func (cn *conn) saslRoundTrip(ctx context.Context, token []byte) ([]byte, Code, error) {
	if token == nil {
		token = []byte{}
	}
	r := jute.Request{Xid: cn.c.nextXid(), Op: jute.OpSASL, Token: token}
	e := jute.NewFrameEncoder()
	r.Encode(e)
	if _, err := cn.nc.Write(e.Frame()); err != nil {
		return nil, 0, cn.saslIOErr(ctx, err)
	}
	p, err := jute.ReadFrame(cn.br, cn.c.cfg.maxReply)
	if err != nil {
		return nil, 0, cn.saslIOErr(ctx, err)
	}
	d := jute.NewDecoder(p)
	var h jute.ReplyHeader
	h.Decode(d)
	var reply []byte
	if h.Err == 0 {
		reply = d.Buffer()
	}
	switch {
	case d.Err() != nil:
		return nil, 0, fmt.Errorf("%w: SASL reply: %v", errProtocol, d.Err())
	case h.Xid != r.Xid:
		return nil, 0, fmt.Errorf("%w: SASL reply with xid %d, expected %d", errProtocol, h.Xid, r.Xid)
	}
	return reply, Code(h.Err), nil
}

// saslIOErr describes a failure to write or read during the exchange.
func (cn *conn) saslIOErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("SASL: %w", ctx.Err())
	}
	return fmt.Errorf("SASL: %w", readErr(cn, err))
}
