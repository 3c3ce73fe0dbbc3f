package zkserver

import (
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zkpath"
)

// validPath reports whether p is a path ZooKeeper accepts.
func validPath(p string) bool { return zkpath.Check(p) == nil }

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
