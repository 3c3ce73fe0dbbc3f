package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file holds the requests the recipes send through the Session, the
// idempotent ones retried across connection loss, counted in the Session's
// Stats (stats.go).

// awaitUp waits until the session is connected, ctx ends or the session is over.
func (s *Session) awaitUp(ctx context.Context) error { return s.c.WaitConnected(ctx) }

// retry runs an idempotent request, again after each connection loss, while
// the session lives and ctx allows.
func retry(ctx context.Context, s *Session, f func() error) error {
	for {
		err := f()
		if !errors.Is(err, ErrConnectionLoss) {
			return err
		}
		if err := s.awaitUp(ctx); err != nil {
			return err
		}
	}
}

// cleanupContext returns a context for work that must be attempted even when
// the caller's context has ended (deleting our own node): not cancelled with
// parent, bounded by the session timeout.
func (s *Session) cleanupContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), s.Timeout())
}

// children lists p's children, retrying across connection loss.
func (s *Session) children(ctx context.Context, p string) ([]string, error) {
	kids, _, err := s.childrenStat(ctx, p)
	return kids, err
}

// childrenStat lists p's children and returns p's Stat with them.
func (s *Session) childrenStat(ctx context.Context, p string) (kids []string, st zkclient.Stat, err error) {
	err = retry(ctx, s, func() error {
		s.stats.listings.Add(1)
		kids, st, err = s.c.Children(ctx, p)
		return err
	})
	return kids, st, err
}

// stat returns p's Stat, or an error wrapping zkclient.ErrNoNode.
func (s *Session) stat(ctx context.Context, p string) (st zkclient.Stat, err error) {
	err = retry(ctx, s, func() error {
		s.stats.reads.Add(1)
		st, err = s.c.ExistsAsync(p).Wait(ctx)
		return err
	})
	return st, err
}

// remove deletes p (any version), retrying across connection loss while the
// session lives. A node already gone counts as deleted.
func (s *Session) remove(ctx context.Context, p string) error {
	err := retry(ctx, s, func() error {
		s.stats.deletes.Add(1)
		return s.c.Delete(ctx, p, -1)
	})
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	return err
}

// removeLater runs remove in the background, again after each failure,
// until it succeeds or the session is over: a node of ours that a caller
// could not delete in time must still go.
func (s *Session) removeLater(remove func(context.Context) error) {
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.c.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			err := remove(ctx)
			if err == nil || s.Err() != nil || ctx.Err() != nil {
				return
			}
			s.log.Warn("zookeeper: deleting a node of this session failed; trying again", "err", err)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}()
}

// removeOwn deletes the ephemeral node p if it is this session's (even if
// ctx is already cancelled, bounded by the session timeout); a node that is
// gone or another session's is left alone. It deletes once, then looks
// again: a delete sent again after a lost answer could remove another
// session's node of the same name, made meanwhile.
func (s *Session) removeOwn(ctx context.Context, p string) error {
	if err := s.Err(); err != nil {
		return err
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	for {
		st, err := s.stat(cctx, p)
		if errors.Is(err, zkclient.ErrNoNode) || err == nil && st.EphemeralOwner != s.ID() {
			return nil // gone, or another session's
		}
		if err != nil {
			return err
		}
		s.stats.deletes.Add(1)
		err = s.c.Delete(cctx, p, -1)
		switch {
		case err == nil, errors.Is(err, zkclient.ErrNoNode):
			return nil
		case errors.Is(err, ErrConnectionLoss):
			if err := s.awaitUp(cctx); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// removeOwnLater runs removeOwn(p) in the background (see removeLater),
// each time after a sync of p: a create whose answer was lost may still be
// on its way through the ensemble when the session is connected again (to
// another server), and a look at p without the sync could miss the node it
// is about to make.
func (s *Session) removeOwnLater(p string) {
	s.removeLater(func(ctx context.Context) error {
		cctx, cancel := s.cleanupContext(ctx)
		err := retry(cctx, s, func() error { return s.c.Sync(cctx, p) })
		cancel()
		if err != nil {
			return err
		}
		return s.removeOwn(ctx, p)
	})
}

// ensurePath creates p and its missing ancestors as container nodes, which
// the server removes once they are empty.
func (s *Session) ensurePath(ctx context.Context, p string) error {
	return s.makePath(ctx, append(parents(p), p), zkclient.Container, s.acl)
}

// makePath creates each of paths, outermost first, that is missing, with
// no data, in mode, with acl; each create is sent again after a connection
// loss.
func (s *Session) makePath(ctx context.Context, paths []string, mode zkclient.CreateMode, acl []zkclient.ACL) error {
	for _, q := range paths {
		err := retry(ctx, s, func() error {
			s.stats.creates.Add(1)
			_, err := s.c.Create(ctx, q, nil, mode, acl)
			return err
		})
		if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			return errorf("create %s: %w", q, err)
		}
	}
	return nil
}

// ensureParents creates the missing ancestors of p as containers.
func (s *Session) ensureParents(ctx context.Context, p string) error {
	if dir := p[:strings.LastIndexByte(p, '/')]; dir != "" {
		return s.ensurePath(ctx, dir)
	}
	return nil
}

// createIfMissing creates p as a persistent node with data (its missing
// parents as containers) unless it exists. It is idempotent, so it retries
// across connection loss.
func (s *Session) createIfMissing(ctx context.Context, p string, data []byte) error {
	for missing := 0; ; {
		err := retry(ctx, s, func() error {
			s.stats.creates.Add(1)
			_, err := s.c.Create(ctx, p, data, zkclient.Persistent, s.acl)
			return err
		})
		switch {
		case err == nil, errors.Is(err, zkclient.ErrNodeExists):
			return nil
		case errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.ensureParents(ctx, p); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// watched is a one-shot watch a recipe waits on; stop removes it when the
// recipe gives up on it (the server's watch too, when nobody else of the
// session needs it).
type watched struct {
	s *Session
	w *zkclient.Watch
}

// event returns the channel of the watch's one event.
func (w watched) event() <-chan zkclient.Event { return w.w.Event() }

// stop removes the watch without waiting: the request that removes the
// server's watch (when nobody else of the session needs it) is sent, its
// answer not awaited. It relies on Remove sending even with an ended ctx.
func (w watched) stop() {
	if w.w == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.w.Remove(ctx)
}

// childrenW lists p's children and sets a one-shot child watch, retrying
// across connection loss. It fails with zkclient.ErrNoNode, setting no
// watch, if p does not exist.
func (s *Session) childrenW(ctx context.Context, p string) (kids []string, w watched, err error) {
	err = retry(ctx, s, func() error {
		s.stats.listings.Add(1)
		kids, _, w.w, err = s.c.ChildrenW(ctx, p)
		return err
	})
	w.s = s
	return kids, w, err
}

// existsW reports whether p exists and sets a one-shot watch that fires
// when p is created, changed or deleted, retrying across connection loss.
func (s *Session) existsW(ctx context.Context, p string) (ok bool, w watched, err error) {
	_, ok, w, err = s.existsStatW(ctx, p)
	return ok, w, err
}

// existsStatW returns p's Stat, whether it exists, and a one-shot watch
// that fires when it is created, changed or deleted, retrying across
// connection loss.
func (s *Session) existsStatW(ctx context.Context, p string) (st zkclient.Stat, ok bool, w watched, err error) {
	err = retry(ctx, s, func() error {
		s.stats.reads.Add(1)
		st, ok, w.w, err = s.c.ExistsW(ctx, p)
		return err
	})
	w.s = s
	return st, ok, w, err
}

// getData returns p's data and Stat, or an error wrapping zkclient.ErrNoNode.
func (s *Session) getData(ctx context.Context, p string) (data []byte, st zkclient.Stat, err error) {
	err = retry(ctx, s, func() error {
		s.stats.reads.Add(1)
		data, st, err = s.c.Get(ctx, p)
		return err
	})
	return data, st, err
}

// getDataW returns p's data and Stat and sets a one-shot data watch; it
// fails with zkclient.ErrNoNode, setting no watch, if p is gone. This is
// how a waiter watches its predecessor without a gap between listing and
// watching.
func (s *Session) getDataW(ctx context.Context, p string) (data []byte, st zkclient.Stat, w watched, err error) {
	return s.getDataWCounted(ctx, p, &s.stats.reads)
}

// getDataWCounted is getDataW counting its requests in n.
func (s *Session) getDataWCounted(ctx context.Context, p string, n *atomic.Int64) (data []byte, st zkclient.Stat, w watched, err error) {
	err = retry(ctx, s, func() error {
		n.Add(1)
		data, st, w.w, err = s.c.GetW(ctx, p)
		return err
	})
	w.s = s
	return data, st, w, err
}

// watchRead reads p and sets a one-shot watch on it: existsStatW, or
// dataStatW (getData), which needs read permission on p and sets no watch when p
// is missing.
type watchRead func(ctx context.Context, p string) (st zkclient.Stat, ok bool, w watched, err error)

// dataStatW is getDataW as a watchRead.
func (s *Session) dataStatW(ctx context.Context, p string) (zkclient.Stat, bool, watched, error) {
	_, st, w, err := s.getDataW(ctx, p)
	if errors.Is(err, zkclient.ErrNoNode) {
		return st, false, w, nil
	}
	return st, err == nil, w, err
}

// awaitDeleted waits until p is deleted: it returns nil at once if p does
// not exist, and when the server tells of p's deletion (even if p was made
// again since); a change of p's data only renews the watch. It returns
// early with ctx's error, or the session's once it is over. Each look at p
// is one read, with its watch (see watchRead); gone, if not nil, is asked
// about p's Stat at each look, and true counts p as deleted already (a
// node of that name that is not ours any more).
func (s *Session) awaitDeleted(ctx context.Context, p string, read watchRead, gone func(zkclient.Stat) bool) error {
	for {
		st, ok, w, err := read(ctx, p)
		if err != nil {
			return err
		}
		if !ok || gone != nil && gone(st) {
			w.stop()
			return nil
		}
		select {
		case ev := <-w.event():
			switch ev.Type {
			case zkclient.EventNodeDeleted:
				return nil
			case zkclient.EventNotWatching:
				if err := s.Err(); err != nil {
					return err
				}
			}
			// Its data changed: look again.
		case <-ctx.Done():
			w.stop()
			return ctx.Err()
		case <-s.Done():
			return s.Err()
		}
	}
}

// setData writes p's data if its version is version (-1: any), retrying
// across connection loss. After a loss the write may have been applied by
// the attempt whose answer was lost: with a version, the retry then fails
// with zkclient.ErrBadVersion, and the caller must read to know.
func (s *Session) setData(ctx context.Context, p string, data []byte, version int32) (st zkclient.Stat, err error) {
	err = retry(ctx, s, func() error {
		st, err = s.c.Set(ctx, p, data, version)
		return err
	})
	return st, err
}

// create sends one create of p with mode and returns the path the server
// made (with its sequence number, if sequential). If ctx ends first it still
// waits, bounded, for the answer and deletes the node if it was made, so an
// abandoned call leaves nothing behind. It does not retry.
func (s *Session) create(ctx context.Context, p string, data []byte, mode zkclient.CreateMode) (string, error) {
	r, err := s.createWait(ctx, s.startCreate(p, data, mode))
	return r.Path, err
}

// startCreate sends a create without waiting for it.
func (s *Session) startCreate(p string, data []byte, mode zkclient.CreateMode) *zkclient.Call[zkclient.Created] {
	s.stats.creates.Add(1)
	return s.c.CreateAsync(p, data, mode, s.acl)
}

// createWait waits for a create started by startCreate; if ctx ends first,
// it waits on (bounded by the session timeout) and deletes the node if it
// was made; an answer that comes later still has its node deleted, in the
// background, while the session lives. An answer lost with the connection
// after ctx ended, or not come within the session timeout, is reported as
// both ctx's error and ErrConnectionLoss: the node may have been made, and
// only the caller knows how to find it (its name, or its protected prefix)
// and whether it is its own.
func (s *Session) createWait(ctx context.Context, call *zkclient.Call[zkclient.Created]) (zkclient.Created, error) {
	r, err := call.Wait(ctx)
	if err == nil || ctx.Err() == nil {
		return r, err
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	r, err = call.Wait(cctx)
	switch {
	case err == nil:
		if s.remove(cctx, r.Path) != nil {
			s.removeLater(func(ctx context.Context) error { return s.remove(ctx, r.Path) })
		}
	case errors.Is(err, ErrConnectionLoss):
		return zkclient.Created{}, fmt.Errorf("%w (and the create's answer was lost: %w)", ctx.Err(), err)
	case cctx.Err() != nil:
		// No answer within the session timeout: the node may still be
		// made, and must not stay while the session lives. An answer
		// that comes has its node deleted here; one lost with the
		// connection can only be looked for by the caller, which is told
		// that the answer is as good as lost.
		s.removeLater(func(ctx context.Context) error {
			r, err := call.Wait(ctx)
			if err != nil {
				return nil // not made, lost (the caller looks), or the session is over
			}
			return s.remove(ctx, r.Path)
		})
		return zkclient.Created{}, fmt.Errorf("%w (and the create's answer did not come within the session timeout: %w)", ctx.Err(), ErrConnectionLoss)
	}
	return zkclient.Created{}, ctx.Err()
}

// createHooks are what a caller of createNode adds to it.
type createHooks struct {
	// sent, if not nil, runs right after each create is sent (to send a
	// request behind it).
	sent func()
	// recover, if not nil, runs once the session is connected again after
	// an attempt whose answer was lost, and returns the path of the node
	// that attempt made, or "" if it made none: a sequential node's name
	// is the server's choice, so it has to be looked for.
	recover func(context.Context) (string, error)
}

// createNode creates p with data in mode, its missing ancestors as
// containers, and returns the path the server made: the one create loop of
// the recipes. An attempt refused with zkclient.ErrNoNode is made again
// after creating the ancestors (three times at most). After a connection
// loss the create may or may not have been applied: once the session is
// connected again, h.recover decides, and without it (or when it finds
// nothing) the create is sent again; lost reports that an answer was lost
// on the way, so that the caller can take a zkclient.ErrNodeExists for its
// own node. If ctx ends with an attempt in flight, a node it made after all
// is deleted again (see createWait). Any other error ends it.
func (s *Session) createNode(ctx context.Context, p string, data []byte, mode zkclient.CreateMode, h createHooks) (made string, lost bool, err error) {
	for missing := 0; ; {
		call := s.startCreate(p, data, mode)
		if h.sent != nil {
			h.sent()
		}
		r, err := s.createWait(ctx, call)
		switch {
		case err == nil:
			return r.Path, lost, nil
		case errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.ensureParents(ctx, p); err != nil {
				return "", lost, err
			}
		case errors.Is(err, ErrConnectionLoss):
			lost = true
			if err := s.awaitUp(ctx); err != nil {
				return "", lost, err
			}
			if h.recover != nil {
				if found, err := h.recover(ctx); err != nil || found != "" {
					return found, lost, err
				}
			}
		default:
			return "", lost, err
		}
	}
}
