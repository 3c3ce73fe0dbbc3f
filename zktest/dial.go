package zktest

import (
	"context"
	"net"
	"time"
)

// defaultIOTimeout bounds network exchanges whose context has no deadline
// (scaled, see Bound).
func defaultIOTimeout() time.Duration { return Bound(10 * time.Second) }

// dial connects to addr and bounds the connection's life by ctx, or by
// defaultIOTimeout if ctx has no deadline. The returned function closes the
// connection and releases its resources.
func dial(ctx context.Context, addr string) (net.Conn, func(), error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, defaultIOTimeout())
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	return conn, func() {
		stop()
		cancel()
		conn.Close()
	}, nil
}
