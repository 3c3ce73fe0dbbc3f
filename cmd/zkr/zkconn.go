package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/go-zookeeper/zk"
)

// rawConn is a plain ZooKeeper client for the read-only views (members,
// inspect): they read node data and stats, which the recipes do not expose.
// It holds no lock and creates nothing.
type rawConn struct {
	*zk.Conn
	events <-chan zk.Event
}

// dialRaw connects a rawConn, waiting at most --connect-timeout.
func (a *app) dialRaw(ctx context.Context) (*rawConn, error) {
	servers, _, err := a.serverList()
	if err != nil {
		return nil, err
	}
	if err := a.checkTimeouts(); err != nil {
		return nil, err
	}
	conn, events, err := zk.Connect(servers, a.sessionTimeout,
		zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return nil, withCode(exitConnect, fmt.Errorf("cannot connect to ZooKeeper at %s: %w", strings.Join(servers, ","), err))
	}
	c := &rawConn{Conn: conn, events: events}
	cctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c, nil
			}
		case <-cctx.Done():
			c.close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, codef(exitConnect, "cannot connect to ZooKeeper at %s within %v (is it running? see --servers)", strings.Join(servers, ","), a.connectTimeout)
		}
	}
}

// close ends the session and waits for the client to stop.
func (c *rawConn) close() {
	c.Conn.Close()
	for range c.events {
	}
}

// zkError gives an error of the plain client, while doing what on path,
// its exit status: a path it refuses is bad input.
func zkError(what, path string, err error) error {
	if errors.Is(err, zk.ErrInvalidPath) {
		return usagef("invalid path %q: a ZooKeeper path starts with /, and has no empty, \".\" or \"..\" segment and no trailing slash", path)
	}
	return withCode(exitFailure, fmt.Errorf("%s: %w", what, err))
}
