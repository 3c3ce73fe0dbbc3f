package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file holds the requests the recipes and the data plane send through
// the Session: one read (read), one create (create, and makePath for
// missing parents), one write (setData) and the deletes of the session's
// own nodes (remove, removeOwn and their background forms), the idempotent
// ones retried across connection loss (retry), counted in the Session's
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

// readOp is what a read asks the server for.
type readOp uint8

const (
	readData     readOp = iota // getData: the node's data and Stat
	readStat                   // exists: the node's Stat
	readChildren               // getChildren2: the names of its children, and its Stat
)

// reading is one read's request.
type reading struct {
	op    readOp
	watch bool          // set a one-shot watch on the node
	count *atomic.Int64 // where the request is counted; nil: Reads, or Listings for readChildren
}

// reply is what a read returned.
type reply struct {
	data []byte
	kids []string
	st   zkclient.Stat
	ok   bool    // the node exists (false only from a watched readStat)
	w    watched // the watch, if one was asked for and set
}

// read is the one read of the recipes and the data plane: r.op on p,
// counted, sent again after each connection loss while ctx allows and the
// session lives (it changes nothing). A missing node is an error wrapping
// zkclient.ErrNoNode, and no watch is set; but a watched readStat sets its
// watch on the missing name (it fires when the node is made), so it
// answers ok false and no error.
func (s *Session) read(ctx context.Context, p string, r reading) (reply, error) {
	n := r.count
	switch {
	case n != nil:
	case r.op == readChildren:
		n = &s.stats.listings
	default:
		n = &s.stats.reads
	}
	var out reply
	err := retry(ctx, s, func() (err error) {
		n.Add(1)
		out = reply{ok: true, w: watched{s: s}}
		switch {
		case r.op == readData && r.watch:
			out.data, out.st, out.w.w, err = s.c.GetW(ctx, p)
		case r.op == readData:
			out.data, out.st, err = s.c.Get(ctx, p)
		case r.op == readStat && r.watch:
			out.st, out.ok, out.w.w, err = s.c.ExistsW(ctx, p)
		case r.op == readStat:
			out.st, err = s.c.ExistsAsync(p).Wait(ctx)
		case r.watch:
			out.kids, out.st, out.w.w, err = s.c.ChildrenW(ctx, p)
		default:
			out.kids, out.st, err = s.c.Children(ctx, p)
		}
		return err
	})
	return out, err
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
// until it succeeds or the session is over (see retry): a node of ours that
// a caller could not delete in time must still go. Once the session is
// over (Close called, or ended) it does nothing: the server deletes the
// session's ephemeral nodes itself.
func (s *Session) removeLater(remove func(context.Context) error) {
	s.inBackground(func(ctx context.Context) { s.retry(ctx, remove) })
}

// inBackground runs f in a goroutine that Close waits for, with a context
// that ends when the client does, and reports true; once the session is
// over (Close called, or ended) it runs nothing and reports false.
func (s *Session) inBackground(f func(ctx context.Context)) bool {
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return false
	}
	s.background.Add(1) // under mu: before Close sets over, so before its Wait
	s.mu.Unlock()
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
		f(ctx)
	}()
	return true
}

// retry calls remove until it succeeds, or the session or ctx ends, every
// 100 ms after a failure.
func (s *Session) retry(ctx context.Context, remove func(context.Context) error) {
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
		r, err := s.read(cctx, p, reading{op: readStat})
		if errors.Is(err, zkclient.ErrNoNode) || err == nil && r.st.EphemeralOwner != s.ID() {
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

// makePath creates each of paths that is missing, in order (outermost
// first), with no data, in mode, with acl (nil: the Session's): the parents
// loop of create and CreateParents. Each create is sent again after a
// connection loss, and an existing node is what it wants.
func (s *Session) makePath(ctx context.Context, paths []string, mode zkclient.CreateMode, acl []zkclient.ACL) error {
	for _, q := range paths {
		if _, _, err := s.create(ctx, q, nil, creating{mode: mode, acl: acl, resend: true, existing: true}); err != nil {
			return errorf("create %s: %w", q, err)
		}
	}
	return nil
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

// awaitDeleted waits until p is deleted: it returns nil at once if p does
// not exist, and when the server tells of p's deletion (even if p was made
// again since); a change of p's data only renews the watch. It returns
// early with ctx's error, or the session's once it is over. Each look at p
// is one watched read of op: readStat, or readData, which needs read
// permission on p and sets no watch when p is missing. gone, if not nil,
// is asked about p's Stat at each look, and true counts p as deleted
// already (a node of that name that is not ours any more).
func (s *Session) awaitDeleted(ctx context.Context, p string, op readOp, gone func(zkclient.Stat) bool) error {
	_, err := s.awaitDeletedOr(ctx, p, op, gone, nil)
	return err
}

// awaitDeletedOr is awaitDeleted that also returns, with the value, when
// one comes on other first (a nil other never does). The watch on p is
// then left to fire: the caller expects p's deletion to follow.
func (s *Session) awaitDeletedOr(ctx context.Context, p string, op readOp, gone func(zkclient.Stat) bool, other <-chan string) (string, error) {
	for {
		r, err := s.read(ctx, p, reading{op: op, watch: true})
		if errors.Is(err, zkclient.ErrNoNode) {
			r.ok, err = false, nil
		}
		if err != nil {
			return "", err
		}
		if !r.ok || gone != nil && gone(r.st) {
			r.w.stop()
			return "", nil
		}
		select {
		case ev := <-r.w.event():
			switch ev.Type {
			case zkclient.EventNodeDeleted:
				return "", nil
			case zkclient.EventNotWatching:
				if err := s.Err(); err != nil {
					return "", err
				}
			}
			// Its data changed: look again.
		case v := <-other:
			return v, nil
		case <-ctx.Done():
			r.w.stop()
			return "", ctx.Err()
		case <-s.Done():
			return "", s.Err()
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

// createWait waits for a create sent by create (as its creating.wait); if
// ctx ends first, it waits on (bounded by the session timeout) and deletes
// the node if it was made; an answer that comes later still has its node deleted, in the
// background, while the session lives. An answer lost with the connection
// after ctx ended, or not come within the session timeout, is reported as
// both ctx's error and ErrConnectionLoss: the node may have been made, and
// only the caller knows how to find it (its name, or its protected prefix)
// and whether it is its own.
func (s *Session) createWait(ctx context.Context, call *zkclient.Call[zkclient.Created]) (zkclient.Created, error) {
	return awaitLate(ctx, s, call, func(cctx context.Context, r zkclient.Created, err error) (zkclient.Created, error) {
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
	})
}

// awaitLate waits for call's answer. If ctx ends first, it waits on,
// bounded by the session timeout, and hands the answer (or the bound's
// error) to late with the bounded context: a request whose caller gave up
// may still have been applied, and late decides what to do about it.
func awaitLate[T any](ctx context.Context, s *Session, call *zkclient.Call[T], late func(cctx context.Context, v T, err error) (T, error)) (T, error) {
	v, err := call.Wait(ctx)
	if err == nil || ctx.Err() == nil {
		return v, err
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	v, err = call.Wait(cctx)
	return late(cctx, v, err)
}

// creating is how create makes a node.
type creating struct {
	mode zkclient.CreateMode
	ttl  time.Duration  // with a TTL mode
	acl  []zkclient.ACL // nil: the Session's
	// stat asks for the new node's Stat (create2); containers and TTL
	// nodes are always answered with it.
	stat bool
	// parents makes a missing parent (the create refused with
	// zkclient.ErrNoNode), with its missing ancestors, as containers,
	// and sends the create again (three times at most).
	parents bool
	// resend sends the create again after a connection loss, once the
	// session is connected again (after recover, if any); lost then
	// reports that an answer was lost on the way.
	resend bool
	// existing takes a node that exists already for the one wanted:
	// zkclient.ErrNodeExists is success (the Created has only the path).
	existing bool
	// wait, if not nil, waits for each create's answer in place of a
	// plain wait: s.createWait for a node of the caller's own, which is
	// deleted again if ctx ends with its create in flight.
	wait func(context.Context, *zkclient.Call[zkclient.Created]) (zkclient.Created, error)
	// sent, if not nil, runs right after each create is sent (to send a
	// request behind it).
	sent func()
	// recover, if not nil, runs once the session is connected again after
	// an attempt whose answer was lost, and returns the path of the node
	// that attempt made, or "" if it made none: a sequential node's name
	// is the server's choice, so it has to be looked for.
	recover func(context.Context) (string, error)
}

// create is the one create of the recipes and the data plane: it creates p
// with data as c says and returns what the server made (the path, with its
// sequence number if sequential). Without c.resend it sends one create; a
// lost answer is an error wrapping ErrConnectionLoss. With it, after a
// connection loss the create may or may not have been applied: once the
// session is connected again, c.recover decides, and without it (or when
// it finds nothing) the create is sent again; lost reports that an answer
// was lost, so that the caller can take a zkclient.ErrNodeExists for its
// own node. Any other error ends it.
func (s *Session) create(ctx context.Context, p string, data []byte, c creating) (made zkclient.Created, lost bool, err error) {
	acl := c.acl
	if acl == nil {
		acl = s.acl
	}
	for missing, first := 0, true; ; first = false {
		if c.wait == nil || first {
			// Nothing is sent once ctx has ended: neither the first
			// create (nothing to clean up then; sent, its answer could
			// come in before c.wait looked at ctx, and a call cancelled
			// before it began would make its node), nor any create of a
			// call waited plainly. A later create with c.wait is sent:
			// c.wait sees to a create sent that late.
			if err := ctx.Err(); err != nil {
				return zkclient.Created{}, lost, err
			}
		}
		s.stats.creates.Add(1)
		var call *zkclient.Call[zkclient.Created]
		if c.stat || c.ttl != 0 {
			call = s.c.CreateTTLAsync(p, data, c.mode, acl, c.ttl)
		} else {
			call = s.c.CreateAsync(p, data, c.mode, acl)
		}
		if c.sent != nil {
			c.sent()
		}
		var r zkclient.Created
		if c.wait != nil {
			r, err = c.wait(ctx, call)
		} else {
			r, err = call.Wait(ctx)
		}
		switch {
		case err == nil:
			return r, lost, nil
		case c.existing && errors.Is(err, zkclient.ErrNodeExists):
			return zkclient.Created{Path: p}, lost, nil
		case c.parents && errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.makePath(ctx, parents(p), zkclient.Container, nil); err != nil {
				return zkclient.Created{}, lost, err
			}
		case c.resend && errors.Is(err, ErrConnectionLoss):
			lost = true
			if err := s.awaitUp(ctx); err != nil {
				return zkclient.Created{}, lost, err
			}
			if c.recover != nil {
				if found, err := c.recover(ctx); err != nil || found != "" {
					return zkclient.Created{Path: found}, lost, err
				}
			}
		default:
			return zkclient.Created{}, lost, err
		}
	}
}
