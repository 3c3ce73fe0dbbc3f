package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// register is the resource a lock guards in the crash scenario: a node
// whose data is "<token> <value>", the value last written and the highest
// fencing token accepted with it. fencedWrite refuses a token lower than
// that; plainWrite, what a lock without tokens allows, refuses nothing.
type register struct {
	c    *zkclient.Client
	path string
}

// newRegister creates the register's node at path (and its parents).
func newRegister(ctx context.Context, c *zkclient.Client, path string) (*register, error) {
	if err := ensureDir(ctx, c, path[:strings.LastIndexByte(path, '/')]); err != nil {
		return nil, err
	}
	if _, err := c.Create(ctx, path, []byte("0 -"), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		return nil, err
	}
	return &register{c: c, path: path}, nil
}

// read returns the register's token and value.
func (r *register) read(ctx context.Context) (token int64, value string, version int32, err error) {
	data, st, err := r.c.Get(ctx, r.path)
	if err != nil {
		return 0, "", 0, err
	}
	t, v, ok := strings.Cut(string(data), " ")
	if token, err = strconv.ParseInt(t, 10, 64); err != nil || !ok {
		return 0, "", 0, fmt.Errorf("register %s holds %q", r.path, data)
	}
	return token, v, st.Version, nil
}

// fencedWrite writes value with token unless the register has accepted a
// higher token, and returns whether it did and the register's token after.
// The check and the write are one versioned set: a concurrent write makes
// it read and check again.
func (r *register) fencedWrite(ctx context.Context, token int64, value string) (accepted bool, highest int64, err error) {
	for {
		have, _, version, err := r.read(ctx)
		if err != nil {
			return false, 0, err
		}
		if token < have {
			return false, have, nil
		}
		_, err = r.c.Set(ctx, r.path, fmt.Appendf(nil, "%d %s", token, value), version)
		if errors.Is(err, zkclient.ErrBadVersion) {
			continue
		}
		return err == nil, token, err
	}
}

// plainWrite writes value, keeping the token: last writer wins.
func (r *register) plainWrite(ctx context.Context, value string) error {
	have, _, _, err := r.read(ctx)
	if err != nil {
		return err
	}
	_, err = r.c.Set(ctx, r.path, fmt.Appendf(nil, "%d %s", have, value), -1)
	return err
}

// remove deletes the register's node.
func (r *register) remove(ctx context.Context) error {
	return r.c.Delete(ctx, r.path, -1)
}
