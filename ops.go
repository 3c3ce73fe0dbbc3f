package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Stats counts the requests a Session sent and the watch events it received
// since it was created. Recipes' costs (listings per acquisition, watch
// events per release) are read from it.
type Stats struct {
	Creates     int64 // create requests
	Deletes     int64 // delete requests
	Listings    int64 // getChildren requests
	Reads       int64 // getData and exists requests
	WatchEvents int64 // node watch events delivered (not session events)
}

type counters struct {
	creates, deletes, listings, reads, watchEvents atomic.Int64
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	return Stats{
		Creates:     s.stats.creates.Load(),
		Deletes:     s.stats.deletes.Load(),
		Listings:    s.stats.listings.Load(),
		Reads:       s.stats.reads.Load(),
		WatchEvents: s.stats.watchEvents.Load(),
	}
}

// do runs one request f on the connection. The client's calls take no
// context, so f runs on its own goroutine and do returns early when ctx ends
// or the session is over; f then finishes on its own (the client fails its
// requests when the connection closes) and its result is dropped.
func do[T any](ctx context.Context, s *Session, f func(*zk.Conn) (T, error)) (T, error) {
	var zero T
	if err := s.Err(); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		v, err := f(s.conn)
		return v, s.translate(err)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(s.conn)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, s.translate(r.err)
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-s.done:
		return zero, s.Err()
	}
}

// retry runs an idempotent request, again after each connection loss, while
// the session lives and ctx allows.
func retry[T any](ctx context.Context, s *Session, f func(*zk.Conn) (T, error)) (T, error) {
	for {
		v, err := do(ctx, s, f)
		if !errors.Is(err, ErrConnectionLoss) {
			return v, err
		}
		if err := s.awaitUp(ctx); err != nil {
			return v, err
		}
	}
}

// translate maps the client's errors to ours; node errors (zk.ErrNoNode, ...)
// pass unchanged.
func (s *Session) translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrSessionExpired):
		s.end(ErrSessionExpired)
		return s.Err()
	case errors.Is(err, zk.ErrClosing):
		if e := s.Err(); e != nil {
			return e
		}
		return fmt.Errorf("%w: %v", ErrConnectionLoss, err)
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer):
		if e := s.Err(); e != nil {
			return e
		}
		return fmt.Errorf("%w: %v", ErrConnectionLoss, err)
	}
	return err
}

// cleanupContext returns a context for work that must be attempted even when
// the caller's context has ended (deleting our own node): not cancelled with
// parent, bounded by the session timeout (at least 5s).
func (s *Session) cleanupContext(parent context.Context) (context.Context, context.CancelFunc) {
	d := max(s.Timeout(), 5*time.Second)
	return context.WithTimeout(context.WithoutCancel(parent), d)
}

// children lists p's children, retrying across connection loss.
func (s *Session) children(ctx context.Context, p string) ([]string, error) {
	kids, _, err := s.childrenStat(ctx, p)
	return kids, err
}

// childrenStat lists p's children and returns p's Stat with them.
func (s *Session) childrenStat(ctx context.Context, p string) ([]string, *zk.Stat, error) {
	type listing struct {
		kids []string
		st   *zk.Stat
	}
	l, err := retry(ctx, s, func(c *zk.Conn) (listing, error) {
		s.stats.listings.Add(1)
		kids, st, err := c.Children(p)
		return listing{kids, st}, err
	})
	return l.kids, l.st, err
}

// stat returns p's Stat, or an error wrapping zk.ErrNoNode.
func (s *Session) stat(ctx context.Context, p string) (*zk.Stat, error) {
	return retry(ctx, s, func(c *zk.Conn) (*zk.Stat, error) {
		s.stats.reads.Add(1)
		ok, st, err := c.Exists(p)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
		return st, err
	})
}

// remove deletes p (any version), retrying across connection loss while the
// session lives. A node already gone counts as deleted.
func (s *Session) remove(ctx context.Context, p string) error {
	_, err := retry(ctx, s, func(c *zk.Conn) (struct{}, error) {
		s.stats.deletes.Add(1)
		return struct{}{}, c.Delete(p, -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// ensurePath creates p and its missing ancestors as container nodes, which
// the server removes once they are empty.
func (s *Session) ensurePath(ctx context.Context, p string) error {
	for _, q := range append(parents(p), p) {
		_, err := retry(ctx, s, func(c *zk.Conn) (string, error) {
			s.stats.creates.Add(1)
			return c.CreateContainer(q, nil, zk.FlagContainer, s.acl)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zkrecipes: create %s: %w", q, err)
		}
	}
	return nil
}

// childrenW lists p's children and sets a one-shot child watch, retrying
// across connection loss. It fails with zk.ErrNoNode, setting no watch, if p
// does not exist.
func (s *Session) childrenW(ctx context.Context, p string) ([]string, <-chan zk.Event, error) {
	type result struct {
		kids []string
		ch   <-chan zk.Event
	}
	r, err := retry(ctx, s, func(c *zk.Conn) (result, error) {
		s.stats.listings.Add(1)
		kids, _, ch, err := c.ChildrenW(p)
		return result{kids, ch}, err
	})
	return r.kids, r.ch, err
}

// existsW reports whether p exists and sets a one-shot watch that fires when
// p is created, changed or deleted, retrying across connection loss.
func (s *Session) existsW(ctx context.Context, p string) (bool, <-chan zk.Event, error) {
	type result struct {
		ok bool
		ch <-chan zk.Event
	}
	r, err := retry(ctx, s, func(c *zk.Conn) (result, error) {
		s.stats.reads.Add(1)
		ok, _, ch, err := c.ExistsW(p)
		return result{ok, ch}, err
	})
	return r.ok, r.ch, err
}

// getData returns p's data and Stat, or an error wrapping zk.ErrNoNode.
func (s *Session) getData(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	type result struct {
		data []byte
		st   *zk.Stat
	}
	r, err := retry(ctx, s, func(c *zk.Conn) (result, error) {
		s.stats.reads.Add(1)
		data, st, err := c.Get(p)
		return result{data, st}, err
	})
	return r.data, r.st, err
}

// getDataW returns p's data and sets a one-shot data watch; it fails with
// zk.ErrNoNode, setting no watch, if p is gone. This is how a waiter
// watches its predecessor without a gap between listing and watching.
func (s *Session) getDataW(ctx context.Context, p string) ([]byte, <-chan zk.Event, error) {
	type result struct {
		data []byte
		ch   <-chan zk.Event
	}
	r, err := retry(ctx, s, func(c *zk.Conn) (result, error) {
		s.stats.reads.Add(1)
		data, _, ch, err := c.GetW(p)
		return result{data, ch}, err
	})
	return r.data, r.ch, err
}

// setData writes p's data if its version is version (-1: any), retrying
// across connection loss. After a loss the write may have been applied by
// the attempt whose answer was lost: with a version, the retry then fails
// with zk.ErrBadVersion, and the caller must read to know.
func (s *Session) setData(ctx context.Context, p string, data []byte, version int32) (*zk.Stat, error) {
	return retry(ctx, s, func(c *zk.Conn) (*zk.Stat, error) {
		return c.Set(p, data, version)
	})
}

// create sends one create of p with flags and returns the path the server
// made (with its sequence number, if sequential). If ctx ends first it still
// waits, bounded, for the answer and deletes the node if it was made, so an
// abandoned call leaves nothing behind. It does not retry.
func (s *Session) create(ctx context.Context, p string, data []byte, flags int32) (string, error) {
	if err := s.Err(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	type result struct {
		path string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		s.stats.creates.Add(1)
		path, err := s.conn.Create(p, data, flags, s.acl)
		ch <- result{path, s.translate(err)}
	}()
	select {
	case r := <-ch:
		return r.path, r.err
	case <-s.done:
		return "", s.Err()
	case <-ctx.Done():
		cctx, cancel := s.cleanupContext(ctx)
		defer cancel()
		select {
		case r := <-ch:
			if r.err == nil {
				s.remove(cctx, r.path)
			}
		case <-cctx.Done():
		case <-s.done:
		}
		return "", ctx.Err()
	}
}
