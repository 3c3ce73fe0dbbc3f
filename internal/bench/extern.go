package bench

import "context"

// This file lets workloads defined elsewhere (internal/gozk's, on
// go-zookeeper/zk) run as Run's own do, with the same loop, chain, floor
// and counting.

// Contender is a lock implementation under test: Open opens one session
// with its lock on cfg.Path.
type Contender interface {
	Open(ctx context.Context, cfg Config) (Client, error)
}

// Client is one session's lock, with its counters. A client whose Unlock
// queues again at once holds when its loop ends; Finish releases it.
type Client interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Finish(ctx context.Context) error
	Counts() Counts
	SessionID() int64 // the session's id (a chain tells its holder's watches from its waiters' by it)
	Close()
}

// Counts are what a Client observed since it opened; -1 for what it
// cannot observe.
type Counts struct {
	Listings, Reads, Events int64
}

// RunContender runs the workload named recipe on c, as Run runs its own.
func RunContender(ctx context.Context, recipe string, c Contender, cfg Config) (Result, error) {
	cfg, err := cfg.check()
	if err != nil {
		return Result{}, err
	}
	return runContender(ctx, recipe, external{c}, cfg)
}

type external struct{ c Contender }

func (e external) open(ctx context.Context, cfg Config) (client, error) {
	cl, err := e.c.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return externalClient{cl}, nil
}

type externalClient struct{ c Client }

func (e externalClient) lock(ctx context.Context) error   { return e.c.Lock(ctx) }
func (e externalClient) unlock(ctx context.Context) error { return e.c.Unlock(ctx) }
func (e externalClient) finish(ctx context.Context) error { return e.c.Finish(ctx) }
func (e externalClient) close()                           { e.c.Close() }
func (e externalClient) sessionID() int64                 { return e.c.SessionID() }
func (e externalClient) counts() counts {
	n := e.c.Counts()
	return counts{listings: n.Listings, reads: n.Reads, events: n.Events}
}

// FloorConn is one floor session (see floor.go) on another client.
type FloorConn interface {
	// Create creates an ephemeral sequential child "lock-" of dir and
	// returns its path.
	Create(ctx context.Context, dir string) (string, error)
	Remove(ctx context.Context, path string) error
	// Watch reads path and watches it; wait returns once its next event
	// is in.
	Watch(ctx context.Context, path string) (wait func(context.Context) error, err error)
	List(ctx context.Context, dir string) error
	// Ensure creates dir and its parents as containers.
	Ensure(ctx context.Context, dir string) error
	Events() int64 // watch events received
	Close()
}

// RunFloor measures the plain floor (see floor.go) on the sessions dial
// opens, under the name recipe.
func RunFloor(ctx context.Context, recipe string, cfg Config, dial func(context.Context, Config) (FloorConn, error)) (Result, error) {
	cfg, err := cfg.check()
	if err != nil {
		return Result{}, err
	}
	return runFloor(ctx, recipe, cfg, func(ctx context.Context, cfg Config) (floorConn, error) {
		c, err := dial(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return externalFloor{c}, nil
	}, false)
}

type externalFloor struct{ c FloorConn }

func (f externalFloor) create(ctx context.Context, dir string, listing bool) (string, error) {
	return f.c.Create(ctx, dir) // RunFloor runs no floor+listing
}
func (f externalFloor) remove(ctx context.Context, path string) error { return f.c.Remove(ctx, path) }
func (f externalFloor) watch(ctx context.Context, path string) (func(context.Context) error, error) {
	return f.c.Watch(ctx, path)
}
func (f externalFloor) list(ctx context.Context, dir string) error   { return f.c.List(ctx, dir) }
func (f externalFloor) ensure(ctx context.Context, dir string) error { return f.c.Ensure(ctx, dir) }
func (f externalFloor) events() int64                                { return f.c.Events() }
func (f externalFloor) close()                                       { f.c.Close() }
