package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes"
)

// ours is zkrecipes' Mutex, one Session per contender. With requeue, a
// contender that goes round again releases and queues in one write
// (Mutex.Requeue) instead of Unlock then Lock.
type ours struct{ requeue bool }

type oursClient struct {
	s       *zkrecipes.Session
	m       *zkrecipes.Mutex
	requeue bool
	held    bool // requeue: unlock left the lock held, for the next lock to requeue
}

func (o ours) open(ctx context.Context, cfg Config) (client, error) {
	s, err := zkrecipes.NewSession(ctx, cfg.Servers, zkrecipes.WithSessionTimeout(cfg.Timeout))
	if err != nil {
		return nil, err
	}
	return &oursClient{s: s, m: zkrecipes.NewMutex(s, cfg.Path), requeue: o.requeue}, nil
}

func (c *oursClient) lock(ctx context.Context) error {
	if c.held {
		c.held = false
		return c.m.Requeue(ctx)
	}
	return c.m.Lock(ctx)
}

// unlock releases, or with requeue leaves the release to the next lock
// (which the loop calls at once) or to finish.
func (c *oursClient) unlock(ctx context.Context) error {
	if c.requeue {
		c.held = true
		return nil
	}
	return c.m.Unlock(ctx)
}

func (c *oursClient) finish(ctx context.Context) error {
	if !c.held {
		return nil
	}
	c.held = false
	return c.m.Unlock(ctx)
}

func (c *oursClient) close() { c.s.Close() }
func (c *oursClient) counts() counts {
	st := c.s.Stats()
	return counts{listings: st.Listings, reads: st.Reads, events: st.WatchEvents}
}

// raw is a plain go-zookeeper connection that counts the watch events it
// receives (through the event callback, which does not drop events).
type raw struct {
	conn   *zk.Conn
	ev     <-chan zk.Event
	events atomic.Int64
	lists  atomic.Int64
}

func dialRaw(ctx context.Context, cfg Config) (*raw, error) {
	r := &raw{}
	conn, ev, err := zk.Connect(cfg.Servers, cfg.Timeout,
		zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false),
		zk.WithEventCallback(func(e zk.Event) {
			if e.Type != zk.EventSession && e.Type != zk.EventNotWatching {
				r.events.Add(1)
			}
		}))
	if err != nil {
		return nil, err
	}
	r.conn, r.ev = conn, ev
	for conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			r.close()
			return nil, fmt.Errorf("bench: connect %v: %w", cfg.Servers, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return r, nil
}

func (r *raw) close() {
	r.conn.Close()
	for range r.ev {
	}
}

// ensure creates p and its parents (containers).
func (r *raw) ensure(p string) error {
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			_, err := r.conn.CreateContainer(p[:i], nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
	}
	return nil
}

// gozk is go-zookeeper/zk's own Lock.
type gozk struct{}

type gozkClient struct {
	*raw
	l *zk.Lock
}

func (gozk) open(ctx context.Context, cfg Config) (client, error) {
	r, err := dialRaw(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &gozkClient{raw: r, l: zk.NewLock(r.conn, cfg.Path, zk.WorldACL(zk.PermAll))}, nil
}

func (c *gozkClient) lock(context.Context) error   { return c.l.Lock() }
func (c *gozkClient) unlock(context.Context) error { return c.l.Unlock() }
func (c *gozkClient) finish(context.Context) error { return nil }
func (c *gozkClient) counts() counts {
	return counts{listings: -1, reads: -1, events: c.events.Load()}
}

// naive is the herd-prone lock, written only to demonstrate the herd
// effect: every waiter watches the parent's children, so every create and
// every release wakes every waiter, which lists the children again. Do not
// use it for anything else.
type naive struct{}

type naiveClient struct {
	*raw
	dir  string
	node string
}

func (naive) open(ctx context.Context, cfg Config) (client, error) {
	r, err := dialRaw(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &naiveClient{raw: r, dir: cfg.Path}, nil
}

func (c *naiveClient) lock(ctx context.Context) error {
	p, err := c.conn.Create(c.dir+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if err := c.ensure(c.dir); err != nil {
			return err
		}
		p, err = c.conn.Create(c.dir+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	}
	if err != nil {
		return err
	}
	c.node = p[len(c.dir)+1:]
	for {
		c.lists.Add(1)
		kids, _, ch, err := c.conn.ChildrenW(c.dir)
		if err != nil {
			return err
		}
		slices.SortFunc(kids, func(a, b string) int { return seq(a) - seq(b) })
		if len(kids) > 0 && kids[0] == c.node {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.conn.Delete(c.dir+"/"+c.node, -1)
			return ctx.Err()
		}
	}
}

func (c *naiveClient) unlock(context.Context) error {
	return c.conn.Delete(c.dir+"/"+c.node, -1)
}

func (c *naiveClient) finish(context.Context) error { return nil }
func (c *naiveClient) counts() counts {
	return counts{listings: c.lists.Load(), reads: 0, events: c.events.Load()}
}

func seq(name string) int {
	if len(name) < 10 {
		return -1
	}
	n, _ := strconv.Atoi(name[len(name)-10:])
	return n
}
