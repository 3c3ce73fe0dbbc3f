package zkrecipes

import (
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zkpath"
)

// checkPath reports whether p is a path a recipe can own: one ZooKeeper
// accepts (see zkpath.Check), other than the root and the server's own
// /zookeeper tree. The error wraps ErrInvalidPath.
func checkPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	if err := zkpath.Check(p); err != nil {
		return bad(err.Error())
	}
	switch {
	case p == "/":
		return bad("the root cannot hold a recipe")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("/zookeeper is reserved by the server")
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
