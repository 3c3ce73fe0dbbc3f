package fencing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Conn is what a [Register] needs of a ZooKeeper connection; a
// *zkrecipes.Session and a *zkclient.Client both have it.
type Conn interface {
	Get(ctx context.Context, path string) ([]byte, zkclient.Stat, error)
	Set(ctx context.Context, path string, data []byte, version int32) (zkclient.Stat, error)
	Create(ctx context.Context, path string, data []byte, mode zkclient.CreateMode, acl []zkclient.ACL) (zkclient.Created, error)
}

// Register is a fenced value kept in a ZooKeeper node: the value last
// written and the highest token accepted with it, as the node's data
// "<token> <value>" (the token in decimal; the value any bytes). Write
// refuses a token lower than the node's. It is the resource of `zkr demo
// crash`.
//
// The session that writes a Register need not be the lock's: a holder
// whose lock session expired writes with a new one, and that late write is
// what the token refuses. To make a write conditional on still holding the
// lock instead, with the lock's own session, see zkrecipes.Mutex.HeldOp.
//
// A Register is safe for concurrent use.
type Register struct {
	c    Conn
	path string
	acl  []zkclient.ACL
}

// NewRegister returns the register kept at path. The node is created by
// the first Write, with acl (nil: zkclient.WorldACL(zkclient.PermAll));
// its parent must exist.
func NewRegister(c Conn, path string, acl []zkclient.ACL) *Register {
	if acl == nil {
		acl = zkclient.WorldACL(zkclient.PermAll)
	}
	return &Register{c: c, path: path, acl: acl}
}

// Path returns the register's node.
func (r *Register) Path() string { return r.path }

// Read returns the register's highest token and value: 0 and nil if
// nothing was written (the node does not exist). It costs one getData.
func (r *Register) Read(ctx context.Context) (token int64, value []byte, err error) {
	token, value, _, err = r.read(ctx)
	if errors.Is(err, zkclient.ErrNoNode) {
		return 0, nil, nil
	}
	return token, value, err
}

func (r *Register) read(ctx context.Context) (int64, []byte, int32, error) {
	data, st, err := r.c.Get(ctx, r.path)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("fencing: read register %s: %w", r.path, err)
	}
	t, v, ok := bytes.Cut(data, []byte(" "))
	token, err := strconv.ParseInt(string(t), 10, 64)
	if !ok || err != nil || token < 0 {
		return 0, nil, 0, fmt.Errorf("fencing: register %s holds %q, not \"<token> <value>\"", r.path, data)
	}
	return token, v, st.Version, nil
}

// Write writes value with token unless the register has accepted a higher
// token, in which case it writes nothing and returns a [*StaleError]. The
// check and the write are one conditional set on the version read (a
// create for the first write): a concurrent write makes Write read and
// check again. It costs a getData and a setData when uncontended.
//
// A token equal to the register's is accepted; one that is not positive is
// refused with an error wrapping [ErrNoToken]. After an error wrapping
// zkclient.ErrConnectionLoss the write may or may not have been applied;
// writing the same token and value again is safe.
func (r *Register) Write(ctx context.Context, token int64, value []byte) error {
	if err := checkToken(r.path, token); err != nil {
		return err
	}
	data := fmt.Appendf(nil, "%d %s", token, value)
	for {
		have, _, version, err := r.read(ctx)
		switch {
		case errors.Is(err, zkclient.ErrNoNode):
			_, err = r.c.Create(ctx, r.path, data, zkclient.Persistent, r.acl)
			if errors.Is(err, zkclient.ErrNodeExists) {
				continue // someone else's first write came first
			}
			if err != nil {
				return fmt.Errorf("fencing: create register %s: %w", r.path, err)
			}
			return nil
		case err != nil:
			return err
		case token < have:
			return &StaleError{Resource: r.path, Token: token, Highest: have}
		}
		_, err = r.c.Set(ctx, r.path, data, version)
		switch {
		case errors.Is(err, zkclient.ErrBadVersion), errors.Is(err, zkclient.ErrNoNode):
			continue // written or deleted since the read: check again
		case err != nil:
			return fmt.Errorf("fencing: write register %s: %w", r.path, err)
		}
		return nil
	}
}
