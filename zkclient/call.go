package zkclient

import (
	"context"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// call is one request and, once done is closed, its outcome.
type call struct {
	op     int32
	path   string // as the caller gave it, for errors
	xid    int32
	sent   int64 // client clock when queued: the server heard us no earlier
	zxid   int64
	done   chan struct{}
	err    error
	decode func(*jute.Decoder) error // reads the reply body; on the reader goroutine
	onDone func(err error)           // runs once, before done is closed

	c                    *Client   // with obs: for the clock
	obs                  *Observer // told of the end; nil when there is none
	start                int64     // client clock at newCall, with obs
	sentBytes, readBytes int32     // frame sizes, for obs
}

func (c *Client) newCall(op int32, path string) *call {
	cl := &call{op: op, path: path, done: make(chan struct{})}
	if o := c.cfg.obs; o != nil {
		cl.c, cl.obs, cl.start = c, o, c.now()
	}
	return cl
}

// complete records the outcome; it is called exactly once per call.
func (cl *call) complete(err error) {
	cl.err = err
	if cl.onDone != nil {
		cl.onDone(err)
	}
	cl.observe(err)
	close(cl.done)
}

// Call is a request sent without waiting for its answer: requests go out
// in the order they were started and the server answers them in that
// order, so a caller can start several and then wait for each (a create
// and the listing that must see it cost one round trip, not two).
type Call[T any] struct {
	cl *call
	op string
	v  T
}

// Done returns a channel closed once the answer (or the failure) is in.
func (r *Call[T]) Done() <-chan struct{} { return r.cl.done }

// Wait returns the result once it is in, or ctx's error if ctx ends first.
// Waiting again after ctx ended is allowed: the request stays in flight
// until answered or failed, and its result is kept.
func (r *Call[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-r.cl.done:
		return r.result()
	default:
	}
	select {
	case <-r.cl.done:
		return r.result()
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (r *Call[T]) result() (T, error) {
	if r.cl.err != nil {
		var zero T
		return zero, &OpError{Op: r.op, Path: r.cl.path, Err: r.cl.err}
	}
	return r.v, nil
}

// Zxid returns the zxid of the server's reply header, once done: for a
// write, the zxid of its transaction; for a read, the newest the server had
// applied.
func (r *Call[T]) Zxid() int64 {
	select {
	case <-r.cl.done:
		return r.cl.zxid
	default:
		return 0
	}
}
