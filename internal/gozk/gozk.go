// Package gozk holds what zkrecipes measures or checks against
// go-zookeeper/zk, the other Go client: its workloads for the lock
// benchmarks ([Run], [RunReads]), the benchmarks themselves, and the tests
// that run go-zookeeper/zk against zkserver. The benchmarks also measure
// Apache Curator's InterProcessMutex ([Curator]). It is a module of its own
// so that neither the library nor zkr requires go-zookeeper/zk.
package gozk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/bench"
)

// Recipes names the workloads Run knows: bench.Recipes and the two on
// go-zookeeper/zk, "go-zookeeper" (its own Lock) and "floor-go-zookeeper"
// (the plain floor on it).
var Recipes = append(slices.Clip(bench.Recipes), "go-zookeeper", "floor-go-zookeeper")

// Run runs the named workload: one of go-zookeeper/zk's here, any other
// with bench.Run.
func Run(ctx context.Context, recipe string, cfg bench.Config) (bench.Result, error) {
	switch recipe {
	case "go-zookeeper":
		return bench.RunContender(ctx, recipe, lockContender{}, cfg)
	case "floor-go-zookeeper":
		return bench.RunFloor(ctx, recipe, cfg, func(ctx context.Context, cfg bench.Config) (bench.FloorConn, error) {
			r, err := dial(ctx, cfg.Servers, cfg.Timeout)
			if err != nil {
				return nil, err
			}
			return floor{r}, nil
		})
	}
	return bench.Run(ctx, recipe, cfg)
}

// ReadClients names the clients RunReads knows.
var ReadClients = append(slices.Clip(bench.ReadClients), "go-zookeeper")

// RunReads runs bench.RunReads's measure with the named client,
// go-zookeeper/zk's here.
func RunReads(ctx context.Context, client string, cfg bench.ReadsConfig) (bench.ReadsResult, error) {
	if client != "go-zookeeper" {
		return bench.RunReads(ctx, client, cfg)
	}
	return bench.RunReadsWith(ctx, client, cfg, func(ctx context.Context, cfg bench.ReadsConfig, data []byte) (func(context.Context) ([]byte, error), func(), error) {
		r, err := dial(ctx, cfg.Servers, 30*time.Second)
		if err != nil {
			return nil, nil, err
		}
		if dir := bench.Parent(cfg.Path); dir != "/" {
			if err := r.ensure(dir); err != nil {
				r.close()
				return nil, nil, err
			}
		}
		if _, err := r.conn.Create(cfg.Path, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			r.close()
			return nil, nil, err
		}
		get := func(context.Context) ([]byte, error) {
			b, _, err := r.conn.Get(cfg.Path)
			return b, err
		}
		return get, r.close, nil
	})
}

// raw is a plain go-zookeeper connection that counts the watch events it
// receives (through the event callback, which does not drop events).
type raw struct {
	conn   *zk.Conn
	ev     <-chan zk.Event
	events atomic.Int64
}

func dial(ctx context.Context, servers []string, timeout time.Duration) (*raw, error) {
	r := &raw{}
	conn, ev, err := zk.Connect(servers, timeout,
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
			return nil, fmt.Errorf("gozk: connect %v: %w", servers, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return r, nil
}

// close closes the connection and waits until its goroutines are gone.
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

// lockContender is go-zookeeper/zk's own Lock.
type lockContender struct{}

type lockClient struct {
	*raw
	l *zk.Lock
}

func (lockContender) Open(ctx context.Context, cfg bench.Config) (bench.Client, error) {
	r, err := dial(ctx, cfg.Servers, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	return &lockClient{raw: r, l: zk.NewLock(r.conn, cfg.Path, zk.WorldACL(zk.PermAll))}, nil
}

func (c *lockClient) Lock(context.Context) error   { return c.l.Lock() }
func (c *lockClient) Unlock(context.Context) error { return c.l.Unlock() }
func (c *lockClient) Finish(context.Context) error { return nil }
func (c *lockClient) Close()                       { c.raw.close() }
func (c *lockClient) SessionID() int64             { return c.raw.conn.SessionID() }
func (c *lockClient) Counts() bench.Counts {
	return bench.Counts{Listings: -1, Reads: -1, Events: c.events.Load()}
}

// floor is a floor session on go-zookeeper/zk.
type floor struct{ *raw }

func (f floor) Create(_ context.Context, dir string) (string, error) {
	return f.conn.Create(dir+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
}

func (f floor) Remove(_ context.Context, path string) error { return f.conn.Delete(path, -1) }

func (f floor) Watch(_ context.Context, path string) (func(context.Context) error, error) {
	_, _, ev, err := f.conn.GetW(path)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case <-ev:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

func (f floor) List(_ context.Context, dir string) error {
	_, _, err := f.conn.Children(dir)
	return err
}

func (f floor) Ensure(_ context.Context, dir string) error { return f.ensure(dir) }
func (f floor) Events() int64                              { return f.events.Load() }
func (f floor) Close()                                     { f.raw.close() }
