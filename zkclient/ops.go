package zkclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Node is a node's data and Stat, as Get reads them.
type Node struct {
	Data []byte // nil when the node holds no data (null), else a copy
	Stat Stat
}

// Listing is a node's children and its Stat, as Children reads them.
type Listing struct {
	Names []string // the children's names, in no particular order
	Stat  Stat
}

// Created is what a create returns: the path made (with the sequence
// number of a sequential node) and, where the server sends it, its Stat.
type Created struct {
	Path string
	Stat Stat
}

// send queues r with cl on the live connection; it fails cl at once when
// the session is over or no connection is up (ErrConnectionLoss: nothing
// was sent).
func (c *Client) send(r *jute.Request, cl *call) {
	c.mu.Lock()
	cn, err := c.cn, c.err
	if c.closing && err == nil {
		err = ErrClosed
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		cl.complete(err)
	case cn == nil:
		cl.complete(fmt.Errorf("%w: not connected", ErrConnectionLoss))
	default:
		cn.enqueue(r, cl, nil)
	}
}

// start sends r and returns its Call; dec reads the reply body into the
// result. A path error fails the call before anything is sent.
func start[T any](c *Client, name, path string, pathErr error, r *jute.Request, dec func(*jute.Decoder, *T)) *Call[T] {
	call := &Call[T]{op: name, cl: c.newCall(r.Op, path)}
	if dec != nil {
		call.cl.decode = func(d *jute.Decoder) error {
			dec(d, &call.v)
			return nil
		}
	}
	if pathErr != nil {
		call.cl.complete(pathErr)
		return call
	}
	c.send(r, call.cl)
	return call
}

func decodePath(c *Client) func(*jute.Decoder, *Created) {
	return func(d *jute.Decoder, v *Created) { v.Path = c.fromServer(d.String()) }
}

func decodePathStat(c *Client) func(*jute.Decoder, *Created) {
	return func(d *jute.Decoder, v *Created) {
		v.Path = c.fromServer(d.String())
		v.Stat = statOf(d)
	}
}

func decodeStat(d *jute.Decoder, v *Stat) { *v = statOf(d) }

func decodeNode(d *jute.Decoder, v *Node) {
	v.Data = d.Buffer()
	v.Stat = statOf(d)
}

func decodeListing(d *jute.Decoder, v *Listing) {
	v.Names = d.Strings()
	if v.Names == nil {
		v.Names = []string{}
	}
	v.Stat = statOf(d)
}

// createRequest builds the request of a create of mode, choosing the
// opcode: create2 (answered with the Stat), createContainer or createTTL.
func (c *Client) createRequest(path string, data []byte, mode CreateMode, acl []ACL, ttl time.Duration, withStat bool) (*jute.Request, error) {
	if err := checkPath(path, mode.Sequential()); err != nil {
		return nil, err
	}
	if len(acl) == 0 {
		return nil, fmt.Errorf("%w: create %s: empty ACL", ErrInvalidACL, path)
	}
	r := &jute.Request{Op: jute.OpCreate, Path: c.toServer(path), Data: data, ACL: encodeACL(acl), Flags: int32(mode)}
	if withStat {
		r.Op = jute.OpCreate2
	}
	switch {
	case mode == Container:
		r.Op = jute.OpCreateContainer
	case mode.ttl():
		if ttl <= 0 {
			return nil, fmt.Errorf("%w: create %s: mode %d needs a positive TTL", ErrBadArguments, path, mode)
		}
		r.Op, r.TTL = jute.OpCreateTTL, ttl.Milliseconds()
	case ttl != 0:
		return nil, fmt.Errorf("%w: create %s: a TTL needs a TTL mode", ErrBadArguments, path)
	case mode < Persistent || mode > Container:
		return nil, fmt.Errorf("%w: create %s: unknown mode %d", ErrBadArguments, path, mode)
	}
	return r, nil
}

// CreateAsync sends a create of path with data (nil: no data) and
// returns at once. mode may be any but the TTL modes (see CreateTTLAsync).
// The result holds the path made; its Stat only for a Container (see
// Create2Async).
func (c *Client) CreateAsync(path string, data []byte, mode CreateMode, acl []ACL) *Call[Created] {
	return c.createAsync(path, data, mode, acl, false)
}

// Create2Async is CreateAsync with the new node's Stat in the result (the
// create2 request).
func (c *Client) Create2Async(path string, data []byte, mode CreateMode, acl []ACL) *Call[Created] {
	return c.createAsync(path, data, mode, acl, true)
}

func (c *Client) createAsync(path string, data []byte, mode CreateMode, acl []ACL, withStat bool) *Call[Created] {
	r, err := c.createRequest(path, data, mode, acl, 0, withStat)
	if err != nil {
		return start[Created](c, "create", path, err, &jute.Request{Op: jute.OpCreate}, nil)
	}
	if r.Op == jute.OpCreate {
		return start(c, "create", path, nil, r, decodePath(c))
	}
	return start(c, "create", path, nil, r, decodePathStat(c))
}

// Create creates the node path with data and returns the path made (for a
// sequential node, with its number appended) and the new node's Stat (the
// create2 request). It fails with ErrNodeExists, ErrNoNode (the parent is
// missing), ErrNoChildrenForEphemerals. For the TTL modes see CreateTTL.
func (c *Client) Create(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL) (Created, error) {
	if err := ctx.Err(); err != nil {
		return Created{}, err
	}
	return c.Create2Async(path, data, mode, acl).Wait(ctx)
}

// CreateTTLAsync creates a node of a TTL mode (PersistentWithTTL,
// PersistentSequentialWithTTL): the server removes it once it has had no
// children and no change for ttl. The server must allow TTLs
// (zookeeper.extendedTypesEnabled=true); otherwise it answers
// ErrUnimplemented.
func (c *Client) CreateTTLAsync(path string, data []byte, mode CreateMode, acl []ACL, ttl time.Duration) *Call[Created] {
	r, err := c.createRequest(path, data, mode, acl, ttl, true)
	if err != nil {
		return start[Created](c, "create", path, err, &jute.Request{Op: jute.OpCreateTTL}, nil)
	}
	return start(c, "create", path, nil, r, decodePathStat(c))
}

// CreateTTL is CreateTTLAsync, waited for.
func (c *Client) CreateTTL(ctx context.Context, path string, data []byte, mode CreateMode, acl []ACL, ttl time.Duration) (Created, error) {
	if err := ctx.Err(); err != nil {
		return Created{}, err
	}
	return c.CreateTTLAsync(path, data, mode, acl, ttl).Wait(ctx)
}

// DeleteAsync sends a delete of path if its version is version (-1: any).
func (c *Client) DeleteAsync(path string, version int32) *Call[struct{}] {
	return start[struct{}](c, "delete", path, checkPath(path, false),
		&jute.Request{Op: jute.OpDelete, Path: c.toServer(path), Version: version}, nil)
}

// Delete deletes path if its version is version (-1: any). It fails with
// ErrNoNode, ErrBadVersion, ErrNotEmpty.
func (c *Client) Delete(ctx context.Context, path string, version int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.DeleteAsync(path, version).Wait(ctx)
	return err
}

// ExistsAsync sends an exists of path; the result fails with ErrNoNode if
// there is no such node.
func (c *Client) ExistsAsync(path string) *Call[Stat] {
	return start(c, "exists", path, checkPath(path, false),
		&jute.Request{Op: jute.OpExists, Path: c.toServer(path)}, decodeStat)
}

// Exists returns path's Stat and true, or false if there is no such node.
func (c *Client) Exists(ctx context.Context, path string) (Stat, bool, error) {
	if err := ctx.Err(); err != nil {
		return Stat{}, false, err
	}
	st, err := c.ExistsAsync(path).Wait(ctx)
	if errors.Is(err, ErrNoNode) {
		return Stat{}, false, nil
	}
	return st, err == nil, err
}

// GetAsync sends a getData of path.
func (c *Client) GetAsync(path string) *Call[Node] {
	return start(c, "get", path, checkPath(path, false),
		&jute.Request{Op: jute.OpGetData, Path: c.toServer(path)}, decodeNode)
}

// Get returns path's data (nil if it holds none) and Stat. It fails with
// ErrNoNode, ErrNoAuth.
func (c *Client) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stat{}, err
	}
	n, err := c.GetAsync(path).Wait(ctx)
	return n.Data, n.Stat, err
}

// SetAsync sends a setData of path if its version is version (-1: any).
func (c *Client) SetAsync(path string, data []byte, version int32) *Call[Stat] {
	return start(c, "set", path, checkPath(path, false),
		&jute.Request{Op: jute.OpSetData, Path: c.toServer(path), Data: data, Version: version}, decodeStat)
}

// Set writes path's data if its version is version (-1: any) and returns
// the new Stat. It fails with ErrNoNode, ErrBadVersion.
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	if err := ctx.Err(); err != nil {
		return Stat{}, err
	}
	return c.SetAsync(path, data, version).Wait(ctx)
}

// ChildrenAsync sends a getChildren2 of path.
func (c *Client) ChildrenAsync(path string) *Call[Listing] {
	return start(c, "children", path, checkPath(path, false),
		&jute.Request{Op: jute.OpGetChildren2, Path: c.toServer(path)}, decodeListing)
}

// Children returns the names of path's children and path's Stat (its
// Pzxid is the zxid of the last change to the children).
func (c *Client) Children(ctx context.Context, path string) ([]string, Stat, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stat{}, err
	}
	l, err := c.ChildrenAsync(path).Wait(ctx)
	return l.Names, l.Stat, err
}

// GetACL returns path's ACL and Stat.
func (c *Client) GetACL(ctx context.Context, path string) ([]ACL, Stat, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stat{}, err
	}
	type result struct {
		acl []ACL
		st  Stat
	}
	r, err := start(c, "getACL", path, checkPath(path, false),
		&jute.Request{Op: jute.OpGetACL, Path: c.toServer(path)},
		func(d *jute.Decoder, v *result) {
			v.acl = decodeACL(jute.DecodeACLs(d))
			v.st = statOf(d)
		}).Wait(ctx)
	return r.acl, r.st, err
}

// SetACL replaces path's ACL if its ACL version is version (-1: any).
func (c *Client) SetACL(ctx context.Context, path string, acl []ACL, version int32) (Stat, error) {
	if err := ctx.Err(); err != nil {
		return Stat{}, err
	}
	return start(c, "setACL", path, checkPath(path, false),
		&jute.Request{Op: jute.OpSetACL, Path: c.toServer(path), ACL: encodeACL(acl), Version: version}, decodeStat).Wait(ctx)
}

// Sync makes the server this client is connected to catch up with the
// leader on path before answering: a read after Sync sees every write
// committed before Sync was sent.
func (c *Client) Sync(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := start[struct{}](c, "sync", path, checkPath(path, false),
		&jute.Request{Op: jute.OpSync, Path: c.toServer(path)}, nil).Wait(ctx)
	return err
}

// AllChildrenNumber returns the number of nodes below path, at every depth.
func (c *Client) AllChildrenNumber(ctx context.Context, path string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := start(c, "getAllChildrenNumber", path, checkPath(path, false),
		&jute.Request{Op: jute.OpGetAllChildrenNumber, Path: c.toServer(path)},
		func(d *jute.Decoder, v *int32) { *v = d.Int32() }).Wait(ctx)
	return int(n), err
}

// Ephemerals returns the paths of this session's ephemeral nodes that
// start with prefix ("/" for all).
func (c *Client) Ephemerals(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return start(c, "getEphemerals", prefix, checkPath(prefix, false),
		&jute.Request{Op: jute.OpGetEphemerals, Path: c.toServer(prefix)},
		func(d *jute.Decoder, v *[]string) {
			*v = d.Strings()
			for i, p := range *v {
				(*v)[i] = c.fromServer(p)
			}
		}).Wait(ctx)
}

// WhoAmI returns the identities the server has authenticated this session
// as (ZooKeeper 3.7+).
func (c *Client) WhoAmI(ctx context.Context) ([]ClientInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return start(c, "whoAmI", "", nil, &jute.Request{Op: jute.OpWhoAmI},
		func(d *jute.Decoder, v *[]ClientInfo) {
			n := d.VectorLen(8)
			for range n {
				*v = append(*v, ClientInfo{Scheme: d.String(), User: d.String()})
			}
		}).Wait(ctx)
}

// AddAuth authenticates the session with scheme and auth (for "digest":
// "user:password") and, once the server accepted them, sends them again
// after each reconnection. Refused credentials end the session
// (StateAuthFailed) as ZooKeeper closes the connection.
func (c *Client) AddAuth(ctx context.Context, scheme string, auth []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a := authInfo{scheme, append([]byte(nil), auth...)}
	c.mu.Lock()
	cn, err := c.cn, c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if cn == nil {
		return &OpError{Op: "auth", Err: fmt.Errorf("%w: not connected", ErrConnectionLoss)}
	}
	// Recorded before it is sent, so that a reconnection in between sends
	// it too; forgotten if refused.
	c.mu.Lock()
	c.auths = append(c.auths, a)
	c.mu.Unlock()
	select {
	case err = <-cn.sendAuth(a):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		if !errors.Is(err, ErrConnectionLoss) {
			c.mu.Lock()
			for i := range c.auths {
				if c.auths[i].scheme == a.scheme && string(c.auths[i].auth) == string(a.auth) {
					c.auths = append(c.auths[:i:i], c.auths[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
		}
		return &OpError{Op: "auth " + scheme, Err: err}
	}
	return nil
}

// WatcherType selects the watches CheckWatches and RemoveWatches look at.
type WatcherType int32

// Watcher types.
const (
	WatcherChildren WatcherType = WatcherType(jute.WatcherChildren)
	WatcherData     WatcherType = WatcherType(jute.WatcherData)
	WatcherAny      WatcherType = WatcherType(jute.WatcherAny)
)

// CheckWatches asks the server whether this connection has a watch of
// type t on path; it fails with ErrNoWatcher if not.
func (c *Client) CheckWatches(ctx context.Context, path string, t WatcherType) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := start[struct{}](c, "checkWatches", path, checkPath(path, false),
		&jute.Request{Op: jute.OpCheckWatches, Path: c.toServer(path), Mode: int32(t)}, nil).Wait(ctx)
	return err
}
