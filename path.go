package zkrecipes

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkPath reports whether p is a path a recipe can own: absolute, not the
// root, without trailing slash, empty segment, "." or ".." segment, NUL or a
// character ZooKeeper refuses. The error wraps ErrInvalidPath.
func checkPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case p[0] != '/':
		return bad("not absolute (must start with /)")
	case p == "/":
		return bad("the root cannot hold a recipe")
	case strings.HasSuffix(p, "/"):
		return bad("trailing slash")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	}
	for i, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad(fmt.Sprintf("empty segment %d", i+1))
		case ".", "..":
			return bad(fmt.Sprintf("relative segment %q", seg))
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return bad("/zookeeper is reserved by the server")
	}
	for _, r := range p {
		switch {
		case r == 0:
			return bad("contains NUL")
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
			return bad(fmt.Sprintf("contains character %U", r))
		}
	}
	return nil
}

// parents lists the ancestors of p, outermost first, without the root.
func parents(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}
