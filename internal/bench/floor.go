package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The floors are the least a lock can cost on a server, measured with a
// client that sends only the requests the protocol requires:
//
//   - floor: sessions whose nodes are queued in advance (untimed) each wait
//     for their predecessor's deletion event and then delete their own
//     node. A handoff is one delete and one event, no reads. With one
//     contender: one create and one delete per acquisition.
//   - floor+listing: the same chain, but on the event each contender first
//     lists the parent's children once (getChildren2), waits for the
//     answer, and only then deletes its node: the one read a safe handoff
//     needs (the listing that shows no blocker is left and the waiter's own
//     node is still there). With one contender: a create with the listing
//     sent right behind it (pipelined, answered in the same round trip),
//     then the delete.
//
// Both run on zkclient, the client zkrecipes runs on. A floor must be a
// minimum, so it must run on the fastest client there is:
// floor-go-zookeeper is the plain floor on go-zookeeper/zk, to check
// (BenchmarkFloorClients in the root package). As chains the two clients
// were a draw at 10 sessions and zkclient the faster at 100; as one
// create+delete pair after the other, go-zookeeper/zk was the faster, so
// BenchmarkUncontended measures both pairs and compares with the faster.

// floorConn is one floor session: the requests a floor handoff is made of.
type floorConn interface {
	create(ctx context.Context, dir string, listing bool) (string, error)
	remove(ctx context.Context, path string) error
	// watch reads path and watches it; wait returns once its next event
	// is in.
	watch(ctx context.Context, path string) (wait func(context.Context) error, err error)
	list(ctx context.Context, dir string) error
	ensure(ctx context.Context, dir string) error
	events() int64
	close()
}

// zkcFloor is a floor session on zkclient.
type zkcFloor struct{ c *zkclient.Client }

func dialZkc(ctx context.Context, cfg Config) (*zkclient.Client, error) {
	return zkclient.Connect(ctx, cfg.Servers, zkclient.WithSessionTimeout(cfg.Timeout))
}

func dialZkcFloor(ctx context.Context, cfg Config) (floorConn, error) {
	c, err := dialZkc(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return zkcFloor{c}, nil
}

var zkcACL = zkclient.WorldACL(zkclient.PermAll)

func (f zkcFloor) create(ctx context.Context, dir string, listing bool) (string, error) {
	call := f.c.CreateAsync(dir+"/lock-", nil, zkclient.EphemeralSequential, zkcACL)
	var l *zkclient.Call[zkclient.Listing]
	if listing {
		l = f.c.ChildrenAsync(dir)
	}
	r, err := call.Wait(ctx)
	if err != nil {
		return "", err
	}
	if l != nil {
		if _, err := l.Wait(ctx); err != nil {
			return "", err
		}
	}
	return r.Path, nil
}

func (f zkcFloor) remove(ctx context.Context, path string) error { return f.c.Delete(ctx, path, -1) }

func (f zkcFloor) watch(ctx context.Context, path string) (func(context.Context) error, error) {
	_, _, w, err := f.c.GetW(ctx, path)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case <-w.Event():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

func (f zkcFloor) list(ctx context.Context, dir string) error {
	_, _, err := f.c.Children(ctx, dir)
	return err
}

func (f zkcFloor) ensure(ctx context.Context, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i == len(dir) || dir[i] == '/' {
			_, err := f.c.Create(ctx, dir[:i], nil, zkclient.Container, zkcACL)
			if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
				return err
			}
		}
	}
	return nil
}

func (f zkcFloor) events() int64 { return f.c.Notifications() }
func (f zkcFloor) close()        { f.c.Close() }

// runFloor measures a floor (see above) on the sessions dial opens; with
// listing, floor+listing.
func runFloor(ctx context.Context, recipe string, cfg Config, dial func(context.Context, Config) (floorConn, error), listing bool) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clients := make([]floorConn, 0, cfg.Contenders)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for range cfg.Contenders {
		c, err := dial(ctx, cfg)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, c)
	}
	fail := func(err error) (Result, error) { return Result{}, fmt.Errorf("bench: %s: %w", recipe, err) }
	if err := clients[0].ensure(ctx, cfg.Path); err != nil {
		return fail(err)
	}
	before := make([]int64, len(clients))
	for i, c := range clients {
		before[i] = c.events()
	}
	var elapsed time.Duration
	done := 0
	m := newMeter(cfg)
	if cfg.Contenders == 1 {
		c := clients[0]
		m.start(ctx)
		start := time.Now()
		for done < cfg.Acquisitions {
			p, err := c.create(ctx, cfg.Path, listing)
			if err != nil {
				return fail(err)
			}
			if err := c.remove(ctx, p); err != nil {
				return fail(err)
			}
			done++
			if cfg.Progress != nil {
				cfg.Progress(done)
			}
		}
		elapsed = time.Since(start)
		m.stop(ctx)
	}
	for done < cfg.Acquisitions {
		n := min(cfg.Contenders, cfg.Acquisitions-done+1)
		nodes := make([]string, n)
		for i := range n {
			p, err := clients[i].create(ctx, cfg.Path, false)
			if err != nil {
				return fail(err)
			}
			nodes[i] = p
		}
		waits := make([]func(context.Context) error, n)
		for i := 1; i < n; i++ {
			wait, err := clients[i].watch(ctx, nodes[i-1])
			if err != nil {
				return fail(err)
			}
			waits[i] = wait
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		m.start(ctx)
		start := time.Now()
		for i := 1; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := waits[i](ctx); err != nil {
					errs <- err
					return
				}
				if listing {
					if err := clients[i].list(ctx, cfg.Path); err != nil {
						errs <- err
						cancel()
						return
					}
				}
				if err := clients[i].remove(ctx, nodes[i]); err != nil {
					errs <- err
					cancel()
				}
			}()
		}
		if err := clients[0].remove(ctx, nodes[0]); err != nil {
			cancel()
			wg.Wait()
			return fail(err)
		}
		wg.Wait()
		elapsed += time.Since(start)
		m.stop(ctx)
		close(errs)
		if err := <-errs; err != nil {
			return fail(err)
		}
		done += n - 1
		if cfg.Progress != nil {
			cfg.Progress(done)
		}
	}
	var events int64
	for i, c := range clients {
		events += c.events() - before[i]
	}
	lists := 0.0
	if listing {
		lists = 1
	}
	n := float64(done)
	r := Result{
		Recipe:             recipe,
		Chain:              cfg.Contenders > 1,
		Contenders:         cfg.Contenders,
		Acquisitions:       done,
		Elapsed:            elapsed,
		PerSecond:          n / elapsed.Seconds(),
		Handoff:            elapsed / time.Duration(done),
		Listings:           lists,
		Reads:              0,
		Events:             float64(events) / n,
		EventsPerRelease:   float64(events) / n,
		ListingsPerRelease: lists,
	}
	r.ServerReads, r.ServerWrites = m.per(n)
	return r, nil
}
