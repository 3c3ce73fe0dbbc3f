package bench

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ours is zkrecipes' Mutex, one Session per contender. With requeue, a
// contender that goes round again releases and queues in one write
// (Mutex.Requeue) instead of Unlock then Lock; with grants, the Mutex hands
// the lock over by grant from its first Lock (zkrecipes.WithGrants), and
// without, it never does (zkrecipes.WithoutGrants): the default, grants
// once the session has waited on the path, is the first after one
// contended acquisition, and the untimed first round makes it so.
type ours struct{ requeue, grants bool }

type oursClient struct {
	s       *zkrecipes.Session
	m       *zkrecipes.Mutex
	requeue bool
	held    bool // requeue: unlock left the lock held, for the next lock to requeue
}

func (o ours) open(ctx context.Context, cfg Config) (client, error) {
	s, err := zkrecipes.NewSession(ctx, cfg.Servers, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(cfg.Timeout)))
	if err != nil {
		return nil, err
	}
	opts := []zkrecipes.LockOption{zkrecipes.WithoutGrants()}
	if o.grants {
		opts = []zkrecipes.LockOption{zkrecipes.WithGrants()}
	}
	return &oursClient{s: s, m: zkrecipes.NewMutex(s, cfg.Path, opts...), requeue: o.requeue}, nil
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

func (c *oursClient) close()           { c.s.Close() }
func (c *oursClient) sessionID() int64 { return c.s.ID() }
func (c *oursClient) counts() counts {
	st := c.s.Stats()
	return counts{listings: st.Listings, reads: st.Reads, events: st.WatchEvents}
}

// naive is the herd-prone lock, written only to demonstrate the herd
// effect: every waiter watches the parent's children, so every create and
// every release wakes every waiter, which lists the children again. Do not
// use it for anything else.
type naive struct{}

type naiveClient struct {
	c     *zkclient.Client
	dir   string
	node  string
	lists atomic.Int64
}

func (naive) open(ctx context.Context, cfg Config) (client, error) {
	c, err := dialZkc(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &naiveClient{c: c, dir: cfg.Path}, nil
}

func (c *naiveClient) lock(ctx context.Context) error {
	p, err := c.c.Create(ctx, c.dir+"/lock-", nil, zkclient.EphemeralSequential, zkcACL)
	if errors.Is(err, zkclient.ErrNoNode) {
		if err := (zkcFloor{c.c}).ensure(ctx, c.dir); err != nil {
			return err
		}
		p, err = c.c.Create(ctx, c.dir+"/lock-", nil, zkclient.EphemeralSequential, zkcACL)
	}
	if err != nil {
		return err
	}
	c.node = p.Path[len(c.dir)+1:]
	for {
		c.lists.Add(1)
		kids, _, w, err := c.c.ChildrenW(ctx, c.dir)
		if err != nil {
			return err
		}
		slices.SortFunc(kids, func(a, b string) int { return seq(a) - seq(b) })
		if len(kids) > 0 && kids[0] == c.node {
			return nil
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.c.Timeout())
			c.c.Delete(dctx, c.dir+"/"+c.node, -1)
			cancel()
			return ctx.Err()
		}
	}
}

func (c *naiveClient) unlock(ctx context.Context) error {
	return c.c.Delete(ctx, c.dir+"/"+c.node, -1)
}

func (c *naiveClient) finish(context.Context) error { return nil }
func (c *naiveClient) close()                       { c.c.Close() }
func (c *naiveClient) sessionID() int64             { return c.c.SessionID() }
func (c *naiveClient) counts() counts {
	return counts{listings: c.lists.Load(), reads: 0, events: c.c.Notifications()}
}

func seq(name string) int {
	if len(name) < 10 {
		return -1
	}
	n, _ := strconv.Atoi(name[len(name)-10:])
	return n
}
