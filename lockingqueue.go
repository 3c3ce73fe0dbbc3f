package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// LockingQueue is a distributed work queue with at-least-once delivery,
// laid out like kazoo's LockingQueue: items are persistent sequential nodes
// "<path>/entries/entry-<priority>-<seq>" (data = the item), and a consumer
// that takes an item locks it with an ephemeral node
// "<path>/taken/<item node name>" whose data is the consumer's id. The item
// stays queued until the consumer consumes it (Consume deletes the item and
// its lock in one transaction) or gives it back (Release deletes the lock).
// If the consumer's session ends first (it crashed, or was cut off past the
// session timeout), the lock goes with the session and another consumer
// takes the item: an item is processed at least once, twice only when a
// consumer lost its lock while processing it (QueueItem.Lost tells it).
//
// "<path>/entries" and "<path>/taken" are persistent nodes, as kazoo makes
// them (kazoo makes them once and would fail if the server removed them as
// empty containers); "<path>"'s missing ancestors are containers.
//
// A LockingQueue value is one consumer (one id) and may hold several items
// at once; it is safe for concurrent use.
type LockingQueue struct {
	s       *Session
	dir     string
	entries string
	taken   string
	id      []byte
	err     error
}

// NewLockingQueue returns the LockingQueue on path for the session s. A bad
// path is reported, without any network call, by every method.
func NewLockingQueue(s *Session, path string) *LockingQueue {
	return &LockingQueue{
		s: s, dir: path, entries: path + "/entries", taken: path + "/taken",
		// kazoo's consumer id: a random UUID as 32 hex digits.
		id:  []byte(strings.ReplaceAll(uuid.NewString(), "-", "")),
		err: checkPath(path),
	}
}

// ensure makes the queue's two persistent nodes (and the missing ancestors
// of its path, as containers).
func (q *LockingQueue) ensure(ctx context.Context) error {
	for _, p := range []string{q.entries, q.taken} {
		if _, _, err := q.s.create(ctx, p, nil, creating{mode: zkclient.Persistent, parents: true, resend: true, existing: true}); err != nil {
			return err
		}
	}
	return nil
}

// Offer adds an item at the back of the queue, with kazoo's default
// priority (100), in one create; see Queue.Offer for what happens when ctx
// ends or the connection breaks meanwhile (a consumer that has locked the
// item has taken it: a cancelled Offer does not withdraw it from under
// the lock).
func (q *LockingQueue) Offer(ctx context.Context, data []byte) error {
	return q.OfferPriority(ctx, data, kazooDefaultPriority)
}

// OfferPriority is Offer with kazoo's priority, in [0, 999]: items of a
// lower priority number are taken first.
func (q *LockingQueue) OfferPriority(ctx context.Context, data []byte, priority int) error {
	if q.err != nil {
		return q.err
	}
	if err := checkPriority(priority); err != nil {
		return errorf("offer to %s: %w", q.dir, err)
	}
	if err := offerItem(ctx, q.s, q.entries, itemName(true, priority), data, q.ensure, q.withdraw); err != nil {
		return errorf("offer to %s: %w", q.dir, err)
	}
	q.s.offered(ctx, "lqueue", q.dir)
	return nil
}

// withdraw is a LockingQueue's withdrawFunc. In one transaction it locks
// the item p as a consumer would, and deletes the item and the lock: a
// consumer's lock made first refuses it (the consumer has the item), and
// no consumer can lock the item after it. A plain delete would take the
// item from under a consumer holding it, whose Consume then succeeds on an
// item its Offer reported not added.
func (q *LockingQueue) withdraw(ctx context.Context, p string) (taken bool, err error) {
	s, lock := q.s, q.taken+strings.TrimPrefix(p, q.entries)
	s.stats.creates.Add(1)
	s.stats.deletes.Add(2)
	res, err := s.c.Multi(ctx, s.c.CreateOp(lock, q.id, zkclient.Ephemeral, s.acl), s.c.DeleteOp(p, -1), s.c.DeleteOp(lock, -1))
	switch {
	case err == nil:
		return false, nil
	case len(res) == 3 && (errors.Is(res[0].Err, zkclient.ErrNodeExists) || errors.Is(res[1].Err, zkclient.ErrNoNode)):
		return true, nil // locked by a consumer, or consumed
	case len(res) == 3 && errors.Is(res[0].Err, zkclient.ErrNoNode):
		// No lock folder (made after the entries folder, so a crash can
		// leave it missing): no consumer can hold the item, and a plain
		// delete withdraws it.
		return s.deleteItem(ctx, p)
	}
	return false, err
}

// Len returns the number of items in the queue, taken ones included.
func (q *LockingQueue) Len(ctx context.Context) (int, error) {
	if q.err != nil {
		return 0, q.err
	}
	its, err := listItems(ctx, q.s, q.entries)
	if err != nil {
		return 0, errorf("length of %s: %w", q.dir, err)
	}
	return len(its), nil
}

// QueueItem is an item taken from a LockingQueue: locked by this consumer
// until Consume, Release, or the end of the session.
type QueueItem struct {
	q    *LockingQueue
	name string
	data []byte
	h    *nodeHold

	mu   sync.Mutex
	done bool
}

// Take locks the first item no consumer has locked and returns it, waiting
// until there is one, ctx ends or the session is over. The first item is
// the one whose name sorts first: the lowest priority number, then the
// oldest.
//
// It lists the items and the locks, both with a child watch, and creates
// the lock of the first unlocked item; if another consumer locked it
// first, it tries the next. With none left it waits for either watch:
// every waiting consumer wakes when an item is offered, taken or given
// back. A taken item costs two listings, one create and one read, and one
// data watch on its lock while it is held.
func (q *LockingQueue) Take(ctx context.Context) (*QueueItem, error) {
	if q.err != nil {
		return nil, q.err
	}
	a := q.s.queued(ctx, "lqueue", q.dir)
	it, err := q.take(ctx, a)
	if err != nil {
		a.abandoned(err)
		return nil, errorf("take from %s: %w", q.dir, err)
	}
	q.s.taken(ctx, "lqueue", q.dir, a.start)
	return it, nil
}

func (q *LockingQueue) take(ctx context.Context, a acquiring) (*QueueItem, error) {
	s := q.s
	for ensured := false; ; {
		rd, err := s.read(ctx, q.entries, reading{op: readChildren, watch: true})
		entries, ew := rd.kids, rd.w
		var locks []string
		var tw watched
		if err == nil {
			var rd reply
			rd, err = s.read(ctx, q.taken, reading{op: readChildren, watch: true})
			locks, tw = rd.kids, rd.w
			if err != nil {
				ew.stop()
			}
		}
		if errors.Is(err, zkclient.ErrNoNode) && !ensured {
			ensured = true
			if err := q.ensure(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		stop := func() { ew.stop(); tw.stop() }
		for _, e := range items(entries) {
			if slices.Contains(locks, e) {
				continue
			}
			it, err := q.lock(ctx, e, a)
			if it != nil || err != nil {
				stop()
				return it, err
			}
		}
		select {
		case <-ew.event():
			tw.stop()
		case <-tw.event():
			ew.stop()
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-s.Done():
			return nil, s.Err()
		}
	}
}

// lock creates the lock of the item e and reads the item. It returns nil,
// and no error, if another consumer locked it first or consumed it
// meanwhile.
func (q *LockingQueue) lock(ctx context.Context, e string, a acquiring) (it *QueueItem, err error) {
	s, lock := q.s, q.taken+"/"+e
	lost := false
	defer func() {
		if err != nil && lost {
			// An attempt whose answer was lost may have made the lock:
			// it must not stay while the session lives.
			q.unlockLater(e)
		}
	}()
	for {
		_, _, err := s.create(ctx, lock, q.id, creating{mode: zkclient.Ephemeral, wait: s.createWait})
		if errors.Is(err, ErrConnectionLoss) {
			lost = true
			if err := s.awaitUp(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, zkclient.ErrNodeExists) && lost {
			// Perhaps made by our attempt whose answer was lost.
			rd, serr := s.read(ctx, lock, reading{op: readStat})
			st := rd.st
			switch {
			case errors.Is(serr, zkclient.ErrNoNode):
				continue
			case serr != nil:
				return nil, serr
			case st.EphemeralOwner == s.ID():
				err = nil
			}
		}
		if errors.Is(err, zkclient.ErrNodeExists) || errors.Is(err, zkclient.ErrNoNode) {
			return nil, nil // locked by another consumer; or the locks' node is gone
		}
		if err != nil {
			return nil, err
		}
		break
	}
	rd, err := s.read(ctx, q.entries+"/"+e, reading{op: readData})
	data := rd.data
	if err != nil {
		if q.unlock(ctx, e) != nil {
			// Not confirmed in time: the lock must still go.
			q.unlockLater(e)
		}
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil, nil // consumed meanwhile
		}
		return nil, err
	}
	return &QueueItem{q: q, name: e, data: data, h: a.granted(s, lock, 0, 0)}, nil
}

// Data returns the item's data.
func (it *QueueItem) Data() []byte { return it.data }

// Lost returns a channel that is closed when this consumer's lock on the
// item is void: the session expired or was closed, the lock node was
// deleted by someone else, (in strict mode, see WithStrict) the session
// may have expired, or the item was consumed or released. Once it is
// closed another consumer may take the item.
func (it *QueueItem) Lost() <-chan struct{} { return it.h.lost }

// finish marks the item as handled, once.
func (it *QueueItem) finish(op string) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.done {
		return errorf("%s %s/%s: %w", op, it.q.entries, it.name, ErrNotHeld)
	}
	it.done = true
	return nil
}

// Consume removes the item from the queue: it deletes the item and its lock
// in one transaction, retried across connection loss. It fails with an
// error wrapping ErrNodeLost if the lock was lost before (Lost closed):
// the item is then not consumed, the lock is deleted if it is still this
// session's, and another consumer may have the item now. When the server
// does not answer within the session timeout, the item may or may not be
// consumed: the error wraps ErrReleaseUnconfirmed, and the lock is deleted
// in the background (if it is still this session's) once the server
// answers, so that the item is not stuck while the session lives. It fails
// with ErrNotHeld if the item was already consumed or released.
func (it *QueueItem) Consume(ctx context.Context) error {
	if err := it.finish("consume"); err != nil {
		return err
	}
	// The holding ends before the delete, whose watch event must not be
	// taken for someone else's.
	held := it.h.drop()
	err := it.consume(ctx, !held)
	it.h.settle(err == nil)
	if err != nil {
		err = errorf("consume %s/%s: %w", it.q.entries, it.name, it.giveBackLater(err))
	}
	it.h.released(held, err)
	return err
}

// giveBackLater follows a Consume or Release that failed with err: while
// the session lives, the item may still be locked by it, though it no
// longer works on the item, so the lock is deleted in the background once
// the server answers (or the next consumer would wait for this session's
// end). The error it returns wraps ErrReleaseUnconfirmed, unless err says
// the lock was lost before (ErrNodeLost).
func (it *QueueItem) giveBackLater(err error) error {
	if it.q.s.Err() != nil {
		return err
	}
	it.q.unlockLater(it.name)
	if errors.Is(err, ErrNodeLost) {
		return err
	}
	return fmt.Errorf("%w: giving the item back in the background (%w)", ErrReleaseUnconfirmed, err)
}

// consume deletes the item and its lock; lost says the lock was lost
// before.
func (it *QueueItem) consume(ctx context.Context, lost bool) error {
	s, lock, entry := it.q.s, it.q.taken+"/"+it.name, it.q.entries+"/"+it.name
	if lost {
		if err := s.Err(); err != nil {
			return err
		}
		// Lost while the session lives (strict mode's margin, or the
		// lock deleted): not consumed. A lock still ours would keep every
		// other consumer off the item until the session ends, so it is
		// given back, as Release does.
		if err := it.unlock(ctx); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s (the item is back in the queue)", ErrNodeLost, lock)
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	for {
		s.stats.deletes.Add(2)
		res, err := s.c.Multi(cctx, s.c.DeleteOp(entry, -1), s.c.DeleteOp(lock, -1))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrConnectionLoss):
			if err := s.awaitUp(cctx); err != nil {
				return err
			}
			continue // if it was applied, the item is gone now: see below
		case len(res) == 2 && errors.Is(res[0].Err, zkclient.ErrNoNode):
			// The item is gone: consumed by our attempt whose answer was lost.
			return s.remove(cctx, lock)
		case len(res) == 2 && errors.Is(res[1].Err, zkclient.ErrNoNode):
			return fmt.Errorf("%w: %s", ErrNodeLost, lock)
		}
		return err
	}
}

// Release gives the item back to the queue, unprocessed, by deleting its
// lock (even if ctx is already cancelled): another consumer may take it
// at once. A lock that is no longer this session's is left alone. When the
// server does not answer within the session timeout, the error wraps
// ErrReleaseUnconfirmed and the lock is deleted in the background (if it is
// still this session's) once the server answers, as Consume does. It
// returns an error wrapping ErrNotHeld if the item was already consumed or
// released.
func (it *QueueItem) Release(ctx context.Context) error {
	if err := it.finish("release"); err != nil {
		return err
	}
	held := it.h.quit()
	err := it.unlock(ctx)
	if err != nil {
		err = errorf("release %s/%s: %w", it.q.entries, it.name, it.giveBackLater(err))
	}
	it.h.released(held, err)
	return err
}

// unlock deletes the item's lock if it is still this session's (even if
// ctx is already cancelled, bounded by the session timeout).
func (it *QueueItem) unlock(ctx context.Context) error { return it.q.unlock(ctx, it.name) }

// unlockLater deletes the lock of the item name in the background, if it
// is this session's, until that succeeds or the session is over: a lock of
// ours that could not be deleted in time, or that a create whose answer was
// lost may have made, must still go while the session lives.
func (q *LockingQueue) unlockLater(name string) { q.s.removeOwnLater(q.taken + "/" + name) }

// unlock deletes the lock of the item name if it is still this session's.
func (q *LockingQueue) unlock(ctx context.Context, name string) error {
	return q.s.removeOwn(ctx, q.taken+"/"+name)
}
