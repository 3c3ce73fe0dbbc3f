package zkserver

import (
	"crypto/sha1"
	"encoding/base64"
	"math"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// DigestID returns the id of the digest scheme for user and password:
// "user:" followed by base64(sha1("user:password")), as ZooKeeper computes
// it for ACLs and auth packets.
func DigestID(user, password string) string {
	return digest(user + ":" + password)
}

func digest(userPassword string) string {
	user, _, _ := strings.Cut(userPassword, ":")
	sum := sha1.Sum([]byte(userPassword))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// allowed reports whether a connection with the identities ids holds any
// of the permission bits perm in acl.
func allowed(acl []jute.ACL, ids []jute.ID, perm int32) bool {
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.ID.Scheme == "world" && a.ID.ID == "anyone" {
			return true
		}
		for _, id := range ids {
			if id.Scheme == a.ID.Scheme && idMatches(id, a.ID.ID) {
				return true
			}
		}
	}
	return false
}

// permitted looks up the node at p for a request of c that needs perm on
// it: NoNode if there is none, NoAuth if c lacks perm. As in ZooKeeper's
// reads, p is not validated ("" is the root); writes validate it first.
func (s *Server) permitted(c *conn, p string, perm int32) (*node, int32) {
	n := s.tree.lookup(p)
	if n == nil {
		return nil, jute.ErrNoNode
	}
	if !allowed(n.acl, c.auth, perm) {
		return nil, jute.ErrNoAuth
	}
	return n, 0
}

// idMatches reports whether the identity id matches the id of an ACL entry
// of the same scheme.
func idMatches(id jute.ID, aclID string) bool {
	switch id.Scheme {
	case "sasl":
		// ZooKeeper's SASL provider lets the SASL user "super" match
		// every sasl entry.
		return id.ID == aclID || id.ID == "super"
	case "ip":
	default:
		return id.ID == aclID
	}
	acl, bits, ok := parseIPACL(aclID)
	if !ok {
		return false
	}
	addr, ok := parseIPv4(id.ID)
	if !ok {
		return false
	}
	mask := ^uint32(0) << (32 - bits)
	if bits == 0 {
		mask = 0
	}
	return addr&mask == acl&mask
}

// parseIPACL parses the id of an ip ACL entry as ZooKeeper 3.8's
// IPAuthenticationProvider does: an IPv4 address (it has no IPv6
// support), optionally followed by /bits, 0 to 32.
func parseIPACL(id string) (addr uint32, bits int, ok bool) {
	a, b, hasBits := strings.Cut(id, "/")
	if addr, ok = parseIPv4(a); !ok {
		return 0, 0, false
	}
	bits = 32
	if hasBits {
		n, ok := javaParseInt(b)
		if !ok || n < 0 || n > 32 {
			return 0, 0, false
		}
		bits = n
	}
	return addr, bits, true
}

// parseIPv4 parses four dot-separated numbers from 0 to 255, each as
// Java's Integer.parseInt reads it (a sign and leading zeros allowed).
func parseIPv4(s string) (uint32, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return 0, false
	}
	var addr uint32
	for _, p := range parts {
		v, ok := javaParseInt(p)
		if !ok || v < 0 || v > 255 {
			return 0, false
		}
		addr = addr<<8 | uint32(v)
	}
	return addr, true
}

// javaParseInt parses a decimal int as Java's Integer.parseInt does.
func javaParseInt(s string) (int, bool) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "+"), "-")
	if len(s)-len(digits) > 1 || digits == "" || len(digits) > 10 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
		n = n*10 + int(digits[i]-'0')
	}
	if n > math.MaxInt32 {
		return 0, false
	}
	if s[0] == '-' {
		n = -n
	}
	return n, true
}

// fixACL validates an ACL for create or setACL and expands the auth
// scheme into the connection's authenticated identities. It returns
// ErrInvalidACL's code on failure.
func (s *Server) fixACL(acl []jute.ACL, ids []jute.ID) ([]jute.ACL, int32) {
	if len(acl) == 0 {
		return nil, jute.ErrInvalidACL
	}
	var out []jute.ACL
	add := func(a jute.ACL) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range acl {
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		case "auth":
			// Every identity of a provider that authenticates (digest,
			// x509 and sasl; not ip), in the order ZooKeeper iterates
			// them.
			found := false
			for _, id := range javaSetOrder(ids) {
				if id.Scheme == "digest" || id.Scheme == "x509" || id.Scheme == "sasl" {
					add(jute.ACL{Perms: a.Perms, ID: id})
					found = true
				}
			}
			if !found {
				return nil, jute.ErrInvalidACL
			}
		case "digest":
			if strings.Count(a.ID.ID, ":") != 1 {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		case "ip":
			if _, _, ok := parseIPACL(a.ID.ID); !ok {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		case "x509":
			// A scheme only a server with a secure port knows, as in
			// ZooKeeper, whose x509 provider checks that the id parses
			// as a distinguished name.
			if s.opts.TLS == nil || !validX509ID(a.ID.ID) {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		case "sasl":
			// Known only with SASL users configured, as ZooKeeper knows
			// the scheme only with its SASL provider registered.
			if len(s.opts.SASLUsers) == 0 || !validSASLID(a.ID.ID) {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		default:
			return nil, jute.ErrInvalidACL
		}
	}
	return out, 0
}

// authenticate handles an auth packet on c: it returns the identity to
// add to the connection, or false if the scheme is unknown or refuses.
// x509 authenticates again with the connection's client certificate,
// whatever the packet holds; it fails without one.
func (s *Server) authenticate(c *conn, scheme string, auth []byte) (jute.ID, bool) {
	switch scheme {
	case "digest":
		return jute.ID{Scheme: "digest", ID: digest(string(auth))}, true
	case "ip":
		return jute.ID{Scheme: "ip", ID: c.ip}, true
	case "x509":
		for _, id := range c.auth {
			if id.Scheme == "x509" && s.opts.TLS != nil {
				return id, true
			}
		}
	}
	return jute.ID{}, false
}

func containsID(ids []jute.ID, id jute.ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// javaSetOrder returns ids in the order ZooKeeper lists a connection's
// identities (whoAmI): they are kept in a ConcurrentHashMap-backed set,
// which iterates by hash bucket (the spread hash of jute's Id.hashCode,
// in a table of 16 that doubles at three quarters full), and within a
// bucket in the order added.
func javaSetOrder(ids []jute.ID) []jute.ID {
	n := 16
	for len(ids) >= n-n/4 {
		n *= 2
	}
	bucket := func(id jute.ID) int {
		h := int32(37*(37*17+javaHash(id.Scheme))) + javaHash(id.ID)
		h ^= int32(uint32(h) >> 16)
		return int(h&0x7fffffff) & (n - 1)
	}
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b jute.ID) int { return bucket(a) - bucket(b) })
	return out
}

// javaHash is Java's String.hashCode.
func javaHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}
