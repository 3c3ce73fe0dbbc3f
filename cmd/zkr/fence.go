package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// register is the resource a lock guards in the crash scenario: the
// library's fenced register ([fencing.Register]), a node whose data is
// "<token> <value>", the value last written and the highest fencing token
// accepted with it. fencedWrite refuses a token lower than that; plainWrite,
// what a lock without tokens allows, refuses nothing (the library has no
// such write: it is the demo's unfenced contrast).
type register struct {
	*fencing.Register
	c *zkclient.Client
}

// newRegister creates the register's node at path (and its parents), with
// token 0, so that a plain write finds it.
func newRegister(ctx context.Context, c *zkclient.Client, path string) (*register, error) {
	if err := ensureDir(ctx, c, path[:strings.LastIndexByte(path, '/')]); err != nil {
		return nil, err
	}
	acl := zkclient.WorldACL(zkclient.PermAll)
	if _, err := c.Create(ctx, path, []byte("0 -"), zkclient.Persistent, acl); err != nil {
		return nil, err
	}
	return &register{Register: fencing.NewRegister(c, path, acl), c: c}, nil
}

// read returns the register's token and value.
func (r *register) read(ctx context.Context) (token int64, value string, err error) {
	token, v, err := r.Read(ctx)
	return token, string(v), err
}

// fencedWrite writes value with token unless the register has accepted a
// higher token, and returns whether it did and the register's token after.
func (r *register) fencedWrite(ctx context.Context, token int64, value string) (accepted bool, highest int64, err error) {
	err = r.Write(ctx, token, []byte(value))
	var stale *fencing.StaleError
	switch {
	case errors.As(err, &stale):
		return false, stale.Highest, nil
	case err != nil:
		return false, 0, err
	}
	return true, token, nil
}

// plainWrite writes value, keeping the token: last writer wins.
func (r *register) plainWrite(ctx context.Context, value string) error {
	have, _, err := r.read(ctx)
	if err != nil {
		return err
	}
	if _, err = r.c.Set(ctx, r.Path(), fmt.Appendf(nil, "%d %s", have, value), -1); err != nil {
		return fmt.Errorf("write register %s: %w", r.Path(), err)
	}
	return nil
}

// remove deletes the register's node.
func (r *register) remove(ctx context.Context) error {
	return r.c.Delete(ctx, r.Path(), -1)
}
