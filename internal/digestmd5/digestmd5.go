// Package digestmd5 holds the parts of SASL DIGEST-MD5 (RFC 2831) that a
// client and a server share: reading and writing the name=value
// directives of challenges and responses, and computing the response and
// rspauth values. Only the "auth" quality of protection (authentication,
// no integrity or confidentiality layer) is supported, which is what
// ZooKeeper negotiates.
package digestmd5

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ZooKeeper's hard-wired names: its Java client and server create their
// SASL objects with service "zookeeper" and server name "zk-sasl-md5",
// which is also the realm the server offers.
const (
	Service    = "zookeeper"
	ServerName = "zk-sasl-md5"
	DigestURI  = Service + "/" + ServerName
)

// Directive is one name=value pair of a challenge or a response.
type Directive struct {
	Name  string // lower case
	Value string // unquoted
}

// ErrFormat reports a challenge or response that does not parse.
var ErrFormat = errors.New("digest-md5: malformed directives")

// Parse reads a comma-separated list of directives, each name=token or
// name="quoted string" (a backslash escapes the next character), with
// optional white space around the elements. Empty elements are skipped, as
// RFC 2831's #rule allows.
func Parse(b []byte) ([]Directive, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrFormat)
	}
	s := string(b)
	var out []Directive
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
	}
	for {
		skipSpace()
		if i == len(s) {
			return out, nil
		}
		if s[i] == ',' {
			i++
			continue
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		name := strings.ToLower(s[start:i])
		skipSpace()
		if name == "" || i == len(s) || s[i] != '=' {
			return nil, fmt.Errorf("%w: expected name=value at byte %d", ErrFormat, start)
		}
		i++
		skipSpace()
		var v strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					v.WriteByte(s[i])
					i++
					continue
				}
				if c == '"' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("%w: unterminated quoted value of %s", ErrFormat, name)
			}
		} else {
			start := i
			for i < len(s) && s[i] != ',' && s[i] != ' ' && s[i] != '\t' {
				i++
			}
			v.WriteString(s[start:i])
		}
		out = append(out, Directive{Name: name, Value: v.String()})
		skipSpace()
		if i < len(s) && s[i] != ',' {
			return nil, fmt.Errorf("%w: expected a comma at byte %d", ErrFormat, i)
		}
	}
}

// Single returns the value of the directive name, which must appear at
// most once; ok is false when it is absent.
func Single(ds []Directive, name string) (value string, ok bool, err error) {
	for _, d := range ds {
		if d.Name != name {
			continue
		}
		if ok {
			return "", false, fmt.Errorf("%w: %s given twice", ErrFormat, name)
		}
		value, ok = d.Value, true
	}
	return value, ok, nil
}

// All returns the values of every directive name, in order.
func All(ds []Directive, name string) []string {
	var out []string
	for _, d := range ds {
		if d.Name == name {
			out = append(out, d.Value)
		}
	}
	return out
}

// Quote returns s as a quoted string, with '"' and '\' escaped.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// Params are the values both sides hash.
type Params struct {
	User, Realm, Password string
	Authzid               string // "" if the response carries none
	Nonce, Cnonce, NC     string
	Qop                   string // "auth"
	DigestURI             string
	UTF8                  bool // charset=utf-8 was negotiated
}

// Response returns the response directive's value: the client's proof
// that it knows the password.
func (p Params) Response() (string, error) { return p.value("AUTHENTICATE") }

// RspAuth returns the rspauth directive's value: the server's proof, in
// its last message, that it knows the password too.
func (p Params) RspAuth() (string, error) { return p.value("") }

// value computes RFC 2831's response-value with method as A2's prefix.
func (p Params) value(method string) (string, error) {
	if p.Qop != "auth" {
		return "", fmt.Errorf("digest-md5: qop %q is not supported", p.Qop)
	}
	user, err := hashBytes(p.User, p.UTF8)
	if err != nil {
		return "", fmt.Errorf("digest-md5: user name: %w", err)
	}
	realm, err := hashBytes(p.Realm, p.UTF8)
	if err != nil {
		return "", fmt.Errorf("digest-md5: realm: %w", err)
	}
	pass, err := hashBytes(p.Password, p.UTF8)
	if err != nil {
		return "", fmt.Errorf("digest-md5: password: %w", err)
	}
	h := md5.New()
	h.Write(user)
	h.Write([]byte(":"))
	h.Write(realm)
	h.Write([]byte(":"))
	h.Write(pass)
	a1 := h.Sum(nil) // the raw 16 bytes, then the session's values
	a1 = append(a1, ":"+p.Nonce+":"+p.Cnonce...)
	if p.Authzid != "" {
		a1 = append(a1, ":"+p.Authzid...)
	}
	a2 := method + ":" + p.DigestURI
	return hexMD5(hexMD5(string(a1)) + ":" + p.Nonce + ":" + p.NC + ":" + p.Cnonce + ":" + p.Qop + ":" + hexMD5(a2)), nil
}

func hexMD5(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hashBytes returns the bytes of s that go into the hash: ISO 8859-1 when
// every character fits in it (RFC 2831 asks for that conversion even under
// charset=utf-8, and Java's implementation makes it), else UTF-8, which
// needs charset=utf-8.
func hashBytes(s string, utf8OK bool) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			if !utf8OK {
				return nil, fmt.Errorf("%q has characters outside ISO 8859-1 and the server did not offer UTF-8", s)
			}
			return []byte(s), nil
		}
		out = append(out, byte(r))
	}
	return out, nil
}
