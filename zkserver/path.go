package zkserver

import (
	"strings"
	"unicode/utf8"
)

// validPath reports whether p is a path ZooKeeper accepts: absolute, no
// empty, "." or ".." segments, no trailing slash (except for the root),
// and no control or private-use characters.
func validPath(p string) bool {
	if p == "" || p[0] != '/' || !utf8.ValidString(p) {
		return false
	}
	if p == "/" {
		return true
	}
	if strings.HasSuffix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for _, r := range p {
		switch {
		case r == 0,
			r >= 0x01 && r <= 0x1f,
			r >= 0x7f && r <= 0x9f,
			r >= 0xd800 && r <= 0xf8ff,
			r >= 0xfff0:
			return false
		}
	}
	return true
}

// parentOf returns the parent of p ("/" for top-level nodes) and p's last
// segment.
func parentOf(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// join appends a child name to a parent path.
func join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
