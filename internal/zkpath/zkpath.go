// Package zkpath holds ZooKeeper's rules for node paths, in one place for
// the recipes (which check a path before any network call) and zkserver
// (which answers as ZooKeeper does).
package zkpath

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Check returns nil if ZooKeeper accepts p as a node path, or an error
// saying why not: p must be absolute, without a trailing slash (except the
// root itself), empty, "." or ".." segments, and without the characters
// ZooKeeper refuses (NUL, controls, surrogates and private use, U+FFF0 and
// above — ZooKeeper checks UTF-16 units, so characters beyond U+FFFF, which
// need surrogates, are refused too).
func Check(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case p[0] != '/':
		return errors.New("not absolute (must start with /)")
	case p == "/":
		return nil
	case strings.HasSuffix(p, "/"):
		return errors.New("trailing slash")
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	}
	for i, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return fmt.Errorf("empty segment %d", i+1)
		case ".", "..":
			return fmt.Errorf("relative segment %q", seg)
		}
	}
	for _, r := range p {
		switch {
		case r == 0:
			return errors.New("contains NUL")
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
			return fmt.Errorf("contains character %U", r)
		}
	}
	return nil
}

// Join returns the path of the child name of p ("/name" under the root).
func Join(p, name string) string {
	if p == "/" {
		return "/" + name
	}
	return p + "/" + name
}

// Parent returns the path of p's parent ("/" for a child of the root and
// for the root itself).
func Parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
