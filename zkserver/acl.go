package zkserver

import (
	"crypto/sha1"
	"encoding/base64"
	"net/netip"
	"slices"
	"strings"

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

// idMatches reports whether the identity id matches the id of an ACL entry
// of the same scheme.
func idMatches(id jute.ID, aclID string) bool {
	if id.Scheme != "ip" {
		return id.ID == aclID
	}
	addr, err := netip.ParseAddr(id.ID)
	if err != nil {
		return false
	}
	if pfx, err := netip.ParsePrefix(aclID); err == nil {
		return pfx.Masked().Contains(addr)
	}
	a, err := netip.ParseAddr(aclID)
	return err == nil && a == addr
}

// fixACL validates an ACL for create or setACL and expands the auth
// scheme into the connection's authenticated identities. It returns
// ErrInvalidACL's code on failure.
func fixACL(acl []jute.ACL, ids []jute.ID) ([]jute.ACL, int32) {
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
			found := false
			for _, id := range ids {
				if id.Scheme == "digest" {
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
			if _, err := netip.ParseAddr(a.ID.ID); err != nil {
				if _, err := netip.ParsePrefix(a.ID.ID); err != nil {
					return nil, jute.ErrInvalidACL
				}
			}
			add(a)
		default:
			return nil, jute.ErrInvalidACL
		}
	}
	return out, 0
}

// authenticate handles an auth packet: it returns the identity to add to
// the connection, or false if the scheme is unknown.
func authenticate(scheme string, auth []byte, clientIP string) (jute.ID, bool) {
	switch scheme {
	case "digest":
		return jute.ID{Scheme: "digest", ID: digest(string(auth))}, true
	case "ip":
		return jute.ID{Scheme: "ip", ID: clientIP}, true
	}
	return jute.ID{}, false
}
