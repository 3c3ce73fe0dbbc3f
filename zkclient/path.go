package zkclient

import (
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/internal/zkpath"
)

// checkPath validates a path the caller gave; a sequential create may end
// with "/" (the server appends the number).
func checkPath(p string, sequential bool) error {
	q := p
	if sequential && strings.HasSuffix(p, "/") {
		q = p + "0"
	}
	if err := zkpath.Check(q); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidPath, p, err)
	}
	return nil
}

// toServer returns the server's path for the caller's path p.
func (c *Client) toServer(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == "/" {
		return c.chroot
	}
	return c.chroot + p
}

// fromServer returns the caller's path for the server's path p.
func (c *Client) fromServer(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == c.chroot {
		return "/"
	}
	if strings.HasPrefix(p, c.chroot) && len(p) > len(c.chroot) && p[len(c.chroot)] == '/' {
		return p[len(c.chroot):]
	}
	return p
}
