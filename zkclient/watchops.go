package zkclient

import (
	"context"
	"errors"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/internal/stream"
)

// startWatch sends r, a read that sets a watch, and returns its Call and
// the Watch that is registered when the answer shows the server set it:
// kindOK on success, and for exists kindExist on ErrNoNode.
func startWatch[T any](c *Client, name, path string, r *jute.Request, dec func(*jute.Decoder, *T), kindOK watchKind, existOnNoNode bool) (*Call[T], *Watch) {
	if err := checkPath(path, false); err != nil {
		return start[T](c, name, path, err, r, nil), nil
	}
	r.Watch = true
	w := &Watch{c: c, key: watchKey{path: r.Path, kind: kindOK}, ch: make(chan Event, 1)}
	call := &Call[T]{op: name, cl: c.newCall(r.Op, path)}
	call.cl.decode = func(d *jute.Decoder) error {
		dec(d, &call.v)
		return nil
	}
	call.cl.onDone = func(err error) {
		switch {
		case err == nil:
			c.watches.settle(c, w, kindOK, true)
		case existOnNoNode && err == ErrNoNode:
			c.watches.settle(c, w, kindExist, true)
		default:
			c.watches.settle(c, w, kindOK, false)
		}
	}
	c.watches.begin(r.Path)
	c.send(r, call.cl)
	return call, w
}

// waitWatch waits for a watch-setting call; if ctx ends first the watch is
// dropped (also if the answer came in meanwhile).
func waitWatch[T any](ctx context.Context, c *Client, call *Call[T], w *Watch) (T, *Watch, error) {
	v, err := call.Wait(ctx)
	if err == nil {
		return v, w, nil
	}
	if w != nil && ctx.Err() != nil {
		c.watches.abandon(c, w)
	}
	return v, nil, err
}

// GetW returns path's data and Stat and sets a one-shot watch that fires
// on the node's next change or deletion. If the node does not exist it
// fails with ErrNoNode and sets no watch: a waiter watching its
// predecessor this way cannot miss a deletion that came first.
func (c *Client) GetW(ctx context.Context, path string) ([]byte, Stat, *Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stat{}, nil, err
	}
	call, w := startWatch(c, "get", path, &jute.Request{Op: jute.OpGetData, Path: c.toServer(path)}, decodeNode, kindData, false)
	n, w, err := waitWatch(ctx, c, call, w)
	return n.Data, n.Stat, w, err
}

// ExistsW reports whether path exists and sets a one-shot watch that fires
// when it is created, changed or deleted.
func (c *Client) ExistsW(ctx context.Context, path string) (Stat, bool, *Watch, error) {
	if err := ctx.Err(); err != nil {
		return Stat{}, false, nil, err
	}
	call, w := startWatch(c, "exists", path, &jute.Request{Op: jute.OpExists, Path: c.toServer(path)}, decodeStat, kindData, true)
	st, err := call.Wait(ctx)
	switch {
	case err == nil:
		return st, true, w, nil
	case errors.Is(err, ErrNoNode):
		return Stat{}, false, w, nil
	case w != nil && ctx.Err() != nil:
		c.watches.abandon(c, w)
	}
	return Stat{}, false, nil, err
}

// ChildrenW returns path's children and Stat and sets a one-shot watch
// that fires when a child is created or deleted, or path is deleted. It
// fails with ErrNoNode, setting no watch, if path does not exist.
func (c *Client) ChildrenW(ctx context.Context, path string) ([]string, Stat, *Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stat{}, nil, err
	}
	call, w := startWatch(c, "children", path, &jute.Request{Op: jute.OpGetChildren2, Path: c.toServer(path)}, decodeListing, kindChild, false)
	l, w, err := waitWatch(ctx, c, call, w)
	return l.Names, l.Stat, w, err
}

// AddWatch sets a persistent watch on path (ZooKeeper 3.6+), and with
// recursive on every node below it too, whether or not path exists. See
// PersistentWatch for what it delivers. On ZooKeeper 3.8 a one-shot watch
// set later on the same path by this client replaces the persistent one on
// the server (fixed in 3.9): watch that path one way only.
func (c *Client) AddWatch(ctx context.Context, path string, recursive bool) (*PersistentWatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkPath(path, false); err != nil {
		return nil, &OpError{Op: "addWatch", Path: path, Err: err}
	}
	kind, mode := kindPersistent, jute.AddWatchPersistent
	if recursive {
		kind, mode = kindRecursive, jute.AddWatchPersistentRecursive
	}
	sp := c.toServer(path)
	w := &PersistentWatch{c: c, key: watchKey{sp, kind}, s: stream.New[Event]()}
	cl := c.newCall(jute.OpAddWatch, path)
	cl.onDone = func(err error) { c.watches.settlePersistent(w, err == nil) }
	c.watches.begin(sp)
	c.send(&jute.Request{Op: jute.OpAddWatch, Path: sp, Mode: mode}, cl)
	select {
	case <-cl.done:
	case <-ctx.Done():
		c.watches.abandonPersistent(c, w)
		return nil, ctx.Err()
	}
	if cl.err != nil {
		return nil, &OpError{Op: "addWatch", Path: path, Err: cl.err}
	}
	return w, nil
}
