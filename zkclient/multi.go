package zkclient

import (
	"context"
	"fmt"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Op is one operation of a transaction (Multi): made by CreateOp,
// DeleteOp, SetOp or CheckOp.
type Op struct {
	req *jute.Request
	err error
}

// CreateOp creates path in a transaction (mode as for Create; TTL modes
// are not allowed here).
func (c *Client) CreateOp(path string, data []byte, mode CreateMode, acl []ACL) Op {
	r, err := c.createRequest(path, data, mode, acl, 0, false)
	return Op{req: r, err: err}
}

// CreateTTLOp creates a node of a TTL mode in a transaction.
func (c *Client) CreateTTLOp(path string, data []byte, mode CreateMode, acl []ACL, ttl time.Duration) Op {
	r, err := c.createRequest(path, data, mode, acl, ttl, true)
	return Op{req: r, err: err}
}

// DeleteOp deletes path if its version is version (-1: any).
func (c *Client) DeleteOp(path string, version int32) Op {
	return Op{req: &jute.Request{Op: jute.OpDelete, Path: c.toServer(path), Version: version}, err: checkPath(path, false)}
}

// SetOp writes path's data if its version is version (-1: any).
func (c *Client) SetOp(path string, data []byte, version int32) Op {
	return Op{req: &jute.Request{Op: jute.OpSetData, Path: c.toServer(path), Data: data, Version: version}, err: checkPath(path, false)}
}

// CheckOp makes the transaction fail unless path exists with version
// version (-1: any version). A write made under a lock can be made
// conditional on still holding it: check the holder's node.
func (c *Client) CheckOp(path string, version int32) Op {
	return Op{req: &jute.Request{Op: jute.OpCheck, Path: c.toServer(path), Version: version}, err: checkPath(path, false)}
}

// FailedOp is an operation that cannot be sent: a transaction holding it
// fails with err before anything is sent. It lets code that builds an Op
// report why it could not (zkrecipes' holding checks when nothing is held)
// without a second return value.
func FailedOp(err error) Op { return Op{err: err} }

// OpResult is the outcome of one operation of a transaction.
type OpResult struct {
	Path string // a create's path made
	Stat *Stat  // a create's or a set's new Stat (nil for delete and check)
	Err  error  // nil, or why this operation failed (a Code); when one fails, all do
}

// MultiAsync sends the operations as one transaction: all are applied, in
// order, or none.
func (c *Client) MultiAsync(ops ...Op) *Call[[]OpResult] {
	r := &jute.Request{Op: jute.OpMulti, Ops: make([]jute.Request, len(ops))}
	for i, o := range ops {
		if o.err != nil {
			return start[[]OpResult](c, "multi", "", fmt.Errorf("operation %d: %w", i, o.err), r, nil)
		}
		if o.req == nil {
			return start[[]OpResult](c, "multi", "", fmt.Errorf("%w: operation %d is empty", ErrBadArguments, i), r, nil)
		}
		r.Ops[i] = *o.req
	}
	return start(c, "multi", "", nil, r, func(d *jute.Decoder, v *[]OpResult) { *v = c.decodeResults(d) })
}

// Multi applies the operations as one transaction: all, in order, or none.
// It returns one result per operation; when the transaction failed, the
// error wraps the first failing operation's Code, and each result holds its
// own (operations after it: ErrRuntimeInconsistency; before it: nil, as
// they were rolled back).
func (c *Client) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := c.MultiAsync(ops...).Wait(ctx)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Err != nil {
			return res, &OpError{Op: fmt.Sprintf("multi (operation %d)", i), Path: c.fromServer(ops[i].req.Path), Err: r.Err}
		}
	}
	return res, nil
}

// readMulti reads the results of a multi reply, each after its header, up
// to the header marked done: one reads the result of an operation of type
// typ and returns false to stop at one it cannot read.
func readMulti(d *jute.Decoder, one func(typ int32) bool) {
	for d.Err() == nil {
		var h jute.MultiHeader
		h.Decode(d)
		if h.Done || !one(h.Type) {
			return
		}
	}
}

func (c *Client) decodeResults(d *jute.Decoder) []OpResult {
	var out []OpResult
	readMulti(d, func(typ int32) bool {
		var r OpResult
		switch typ {
		case jute.OpError:
			if code := d.Int32(); code != 0 {
				r.Err = Code(code)
			}
		case jute.OpCreate:
			r.Path = c.fromServer(d.String())
		case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
			r.Path = c.fromServer(d.String())
			st := statOf(d)
			r.Stat = &st
		case jute.OpSetData:
			st := statOf(d)
			r.Stat = &st
		case jute.OpDelete, jute.OpCheck:
		default:
			d.Int32() // unknown: cannot go on reading
			return false
		}
		out = append(out, r)
		return true
	})
	return out
}

// ReadOp is one read of MultiRead: made by GetOp or ChildrenOp.
type ReadOp struct {
	req jute.Request
	err error
}

// GetOp reads path's data in a MultiRead.
func (c *Client) GetOp(path string) ReadOp {
	return ReadOp{req: jute.Request{Op: jute.OpGetData, Path: c.toServer(path)}, err: checkPath(path, false)}
}

// ChildrenOp lists path's children in a MultiRead.
func (c *Client) ChildrenOp(path string) ReadOp {
	return ReadOp{req: jute.Request{Op: jute.OpGetChildren, Path: c.toServer(path)}, err: checkPath(path, false)}
}

// ReadResult is the outcome of one read of MultiRead.
type ReadResult struct {
	Data     []byte   // GetOp
	Stat     *Stat    // GetOp
	Children []string // ChildrenOp
	Err      error    // this read's failure (each read succeeds or fails alone)
}

// MultiRead runs the reads in one request (ZooKeeper 3.6+); each succeeds
// or fails on its own, and all see the same state of the tree.
func (c *Client) MultiRead(ctx context.Context, ops ...ReadOp) ([]ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &jute.Request{Op: jute.OpMultiRead, Ops: make([]jute.Request, len(ops))}
	for i, o := range ops {
		if o.err != nil {
			return nil, &OpError{Op: "multiRead", Err: fmt.Errorf("operation %d: %w", i, o.err)}
		}
		r.Ops[i] = o.req
	}
	return start(c, "multiRead", "", nil, r, func(d *jute.Decoder, v *[]ReadResult) {
		readMulti(d, func(typ int32) bool {
			var res ReadResult
			switch typ {
			case jute.OpError:
				res.Err = Code(d.Int32())
			case jute.OpGetData:
				res.Data = d.Buffer()
				st := statOf(d)
				res.Stat = &st
			case jute.OpGetChildren:
				res.Children = d.Strings()
				if res.Children == nil {
					res.Children = []string{}
				}
			default:
				return false
			}
			*v = append(*v, res)
			return true
		})
	}).Wait(ctx)
}
