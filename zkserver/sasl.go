package zkserver

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/digestmd5"
	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// errSASLRequired is ZooKeeper's SESSIONCLOSEDREQUIRESASLAUTH: the
// server requires SASL and the connection is closed.
const errSASLRequired int32 = -124

// The steps of a connection's DIGEST-MD5 exchange.
const (
	saslStart     = iota // no challenge sent yet
	saslChallenge        // the challenge is out, the response is awaited
	saslDone             // authenticated
)

// saslState is a connection's DIGEST-MD5 exchange. Guarded by srv.mu.
type saslState struct {
	step  int
	nonce string
}

// nullBuffer is a jute buffer of length -1 (SetSASLResponse with a null
// token).
var nullBuffer = []byte{0xff, 0xff, 0xff, 0xff}

// sasl answers a sasl request (opcode 102) as ZooKeeper's processSasl
// does and reports whether the connection goes on. The reply carries the
// request's xid, zxid 0 and SetSASLResponse{token}. Without SASLUsers the
// server, like ZooKeeper without a JAAS Server section, has no SASL
// server for the connection and answers a null token. A failed exchange
// is answered AuthFailed (SESSIONCLOSEDREQUIRESASLAUTH when SASL is
// required) with a null token, then the connection is closed; the
// session lives on.
func (s *Server) sasl(c *conn, r *jute.Request) bool {
	if len(s.opts.SASLUsers) == 0 {
		c.replyBody(r.Xid, 0, 0, nullBuffer)
		return true
	}
	token, user, err := s.saslStep(c, r.Token)
	if err != nil {
		code := jute.ErrAuthFailed
		if s.opts.RequireSASL {
			code = errSASLRequired
		}
		c.replyBody(r.Xid, 0, code, nullBuffer)
		c.closeAfterFlush()
		return false
	}
	if user != "" {
		id := jute.ID{Scheme: "sasl", ID: user}
		if !containsID(c.auth, id) {
			c.auth = append(c.auth, id)
		}
	}
	e := &jute.Encoder{}
	e.Buffer(token)
	c.replyBody(r.Xid, 0, 0, e.Bytes())
	return true
}

// saslStep runs the next step of c's DIGEST-MD5 exchange as the JDK's
// server does with ZooKeeper's realm and names: the first packet (whose
// token is ignored) gets the challenge, the second must be a response
// proving the password of a configured user, and gets rspauth; user is
// then the identity to add. Anything after that fails.
func (s *Server) saslStep(c *conn, token []byte) (reply []byte, user string, err error) {
	switch c.sasl.step {
	case saslStart:
		var b [30]byte
		rand.Read(b[:])
		c.sasl = saslState{step: saslChallenge, nonce: base64.StdEncoding.EncodeToString(b[:])}
		return fmt.Appendf(nil, "realm=%s,nonce=%s,charset=utf-8,algorithm=md5-sess",
			digestmd5.Quote(digestmd5.ServerName), digestmd5.Quote(c.sasl.nonce)), "", nil
	case saslChallenge:
		c.sasl.step = saslDone // one response per exchange, right or wrong
		p, err := s.checkResponse(token, c.sasl.nonce)
		if err != nil {
			return nil, "", err
		}
		rsp, err := p.RspAuth()
		if err != nil {
			return nil, "", err
		}
		return []byte("rspauth=" + rsp), p.User, nil
	}
	return nil, "", errors.New("digest-md5: authentication already complete")
}

// checkResponse validates a client's response to the challenge with
// nonce and returns its parameters.
func (s *Server) checkResponse(token []byte, nonce string) (digestmd5.Params, error) {
	ds, err := digestmd5.Parse(token)
	if err != nil {
		return digestmd5.Params{}, err
	}
	get := func(name string, required bool) string {
		v, ok, e := digestmd5.Single(ds, name)
		if e != nil && err == nil {
			err = e
		}
		if required && !ok && err == nil {
			err = fmt.Errorf("digest-md5: response without %s", name)
		}
		return v
	}
	p := digestmd5.Params{
		User: get("username", true), Realm: get("realm", false), Authzid: get("authzid", false),
		Nonce: get("nonce", true), Cnonce: get("cnonce", true), NC: get("nc", true),
		Qop: get("qop", false), DigestURI: get("digest-uri", true),
	}
	cs := get("charset", false)
	proof := get("response", true)
	switch {
	case err != nil:
		return p, err
	case cs != "" && cs != "utf-8":
		return p, fmt.Errorf("digest-md5: charset %q", cs)
	case p.Realm != digestmd5.ServerName:
		return p, fmt.Errorf("digest-md5: realm %q", p.Realm)
	case p.Nonce != nonce:
		return p, errors.New("digest-md5: wrong nonce")
	case p.NC != "00000001":
		return p, fmt.Errorf("digest-md5: nonce count %q", p.NC)
	case p.Qop != "" && p.Qop != "auth":
		return p, fmt.Errorf("digest-md5: qop %q", p.Qop)
	case !strings.EqualFold(p.DigestURI, digestmd5.DigestURI):
		return p, fmt.Errorf("digest-md5: digest-uri %q", p.DigestURI)
	}
	p.Qop, p.UTF8 = "auth", cs == "utf-8"
	password, ok := s.opts.SASLUsers[p.User]
	if !ok {
		return p, fmt.Errorf("digest-md5: unknown user %q", p.User)
	}
	p.Password = password
	want, err := p.Response()
	if err != nil {
		return p, err
	}
	if subtle.ConstantTimeCompare([]byte(proof), []byte(want)) != 1 {
		return p, errors.New("digest-md5: wrong response")
	}
	return p, nil
}

// hasSASL reports whether c completed SASL.
func (c *conn) hasSASL() bool { return c.sasl.step == saslDone && containsScheme(c.auth, "sasl") }

func containsScheme(ids []jute.ID, scheme string) bool {
	for _, id := range ids {
		if id.Scheme == scheme {
			return true
		}
	}
	return false
}

// validSASLID reports whether id is a valid id of a sasl ACL, as
// ZooKeeper's SASL provider checks it: any name without '@', else a
// Kerberos name "primary[/instance]@REALM" whose parts hold neither '/'
// nor '@'.
func validSASLID(id string) bool {
	at := strings.IndexByte(id, '@')
	if at < 0 {
		return true
	}
	name, realm := id[:at], id[at+1:]
	_, instance, _ := strings.Cut(name, "/")
	return !strings.ContainsAny(realm, "/@") && !strings.Contains(instance, "/")
}
