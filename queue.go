package zkrecipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file holds the work queues: items offered by producers and taken by
// consumers, each item a persistent sequential node whose data is the item.
// (The line of contenders of the locks is line.go.)

func checkPriority(priority int) error {
	if priority < 0 || priority > 999 {
		return fmt.Errorf("%w: priority %d is not in [0, 999]", ErrInvalidArgument, priority)
	}
	return nil
}

// Queue is a distributed FIFO work queue on a ZooKeeper path, compatible
// with Apache Curator's SimpleDistributedQueue (items "<path>/qn-<seq>")
// and, with WithKazooNames, with kazoo's Queue (items
// "<path>/entry-<priority>-<seq>"). Each item is a persistent sequential node
// whose data is the item; the path's missing parents are containers, and
// so is the path, as Curator makes it (with WithKazooNames a persistent
// node, as kazoo makes it, since kazoo's producers make it only once).
// Consumers take items in the order of their names, whichever naming made
// them (see Take).
//
// Take is exactly-once: a consumer gets an item only by deleting its node,
// and the server lets one delete succeed, so two consumers never both get
// an item. The item is gone from ZooKeeper once taken: a consumer that dies
// before it has processed it loses it (use LockingQueue when that must not
// happen).
//
// A Queue holds no state of its own; it is safe for concurrent use.
type Queue struct {
	s     *Session
	dir   string
	kazoo bool
	err   error
}

// QueueOption configures a Queue.
type QueueOption func(*Queue)

// WithKazooNames makes Offer name items as kazoo's Queue does,
// "entry-<priority>-<seq>", so that kazoo consumers see them (Curator's
// SimpleDistributedQueue ignores them), and allows OfferPriority. Take reads
// both namings either way.
func WithKazooNames() QueueOption { return func(q *Queue) { q.kazoo = true } }

// NewQueue returns the Queue on path for the session s. A bad path is
// reported, without any network call, by every method.
func NewQueue(s *Session, path string, opts ...QueueOption) *Queue {
	q := &Queue{s: s, dir: path, err: checkPath(path)}
	for _, o := range opts {
		o(q)
	}
	return q
}

// Offer adds an item at the back of the queue: one create. If ctx ends
// before the create is answered, the item is deleted if it was made, so a
// cancelled Offer adds nothing, unless a consumer took the item before it
// could be withdrawn: Offer then returns nil (the item was offered, and
// taken once); when it cannot tell, an error wrapping ErrWriteUnconfirmed. If the connection breaks while the create
// is in flight, the item may or may not have been added (its name is
// chosen by the server, so it cannot be found again), and Offer returns an
// error wrapping ErrWriteUnconfirmed: offer it again only if a duplicate is
// harmless.
func (q *Queue) Offer(ctx context.Context, data []byte) error {
	return q.offer(ctx, data, kazooDefaultPriority)
}

// OfferPriority is Offer with kazoo's priority: items of a lower priority
// number are taken first (priority 100 is kazoo's default and Offer's).
// It needs WithKazooNames, and priority in [0, 999].
func (q *Queue) OfferPriority(ctx context.Context, data []byte, priority int) error {
	if q.err == nil && !q.kazoo {
		return errorf("offer to %s: %w: priorities need kazoo's names (WithKazooNames)", q.dir, ErrInvalidArgument)
	}
	return q.offer(ctx, data, priority)
}

func (q *Queue) offer(ctx context.Context, data []byte, priority int) error {
	if q.err != nil {
		return q.err
	}
	if err := checkPriority(priority); err != nil {
		return errorf("offer to %s: %w", q.dir, err)
	}
	ensure := func(ctx context.Context) error {
		return q.s.makePath(ctx, append(parents(q.dir), q.dir), zkclient.Container, nil)
	}
	if q.kazoo {
		// kazoo makes the path once per Queue value and fails if the
		// server later removes it as an empty container.
		ensure = func(ctx context.Context) error {
			_, _, err := q.s.create(ctx, q.dir, nil, creating{mode: zkclient.Persistent, parents: true, resend: true, existing: true})
			return err
		}
	}
	if err := offerItem(ctx, q.s, q.dir, itemName(q.kazoo, priority), data, ensure, q.s.deleteItem); err != nil {
		return errorf("offer to %s: %w", q.dir, err)
	}
	q.s.offered(ctx, "queue", q.dir)
	return nil
}

// offerItem creates one item node dir/name<seq> with data; if dir is
// missing, ensure makes it. If ctx ends before the create's answer,
// withdraw takes the item back (see offerCreate).
func offerItem(ctx context.Context, s *Session, dir, name string, data []byte, ensure func(context.Context) error, withdraw withdrawFunc) error {
	for missing := 0; ; missing++ {
		// A create is not sent again once it may have been applied; made
		// while the connection is down, it would fail unsent.
		if err := s.awaitUp(ctx); err != nil {
			return err
		}
		p, err := offerCreate(ctx, s, dir+"/"+name, data, withdraw)
		switch {
		case err == nil:
			if seq, ok := parseSeq(p[len(p)-min(len(p), 10):]); !ok || seq < 0 {
				// Past 2^31 items the names no longer sort in arrival order.
				cctx, cancel := s.cleanupContext(ctx)
				defer cancel()
				s.remove(cctx, p)
				return fmt.Errorf("%w under %s", ErrSequenceWrapped, dir)
			}
			return nil
		case errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			if err := ensure(ctx); err != nil {
				return err
			}
		case errors.Is(err, ErrConnectionLoss):
			return unconfirmed(dir+"/"+name, err)
		default:
			return err
		}
	}
}

// offerCreate sends the create of an item. If ctx ends before its answer,
// it waits on (bounded by the session timeout) to learn what happened and
// withdraws the item if it was made: it returns ctx's error when nothing
// was added (the create failed, or its item was deleted again), the item's
// path and no error when a consumer took the item before it could be
// withdrawn (it was offered, and taken once), and an error wrapping
// ErrWriteUnconfirmed when it cannot tell.
func offerCreate(ctx context.Context, s *Session, p string, data []byte, withdraw withdrawFunc) (string, error) {
	wait := func(ctx context.Context, call *zkclient.Call[zkclient.Created]) (zkclient.Created, error) {
		return awaitLate(ctx, s, call, func(cctx context.Context, r zkclient.Created, err error) (zkclient.Created, error) {
			switch {
			case errors.Is(err, ErrConnectionLoss) || cctx.Err() != nil:
				return zkclient.Created{}, unconfirmed(p, ctx.Err())
			case err != nil:
				return zkclient.Created{}, ctx.Err() // refused: nothing was made
			}
			taken, err := withdraw(cctx, r.Path)
			switch {
			case err != nil:
				return zkclient.Created{}, unconfirmed(r.Path, fmt.Errorf("%w (withdrawing it: %v)", ctx.Err(), err))
			case taken:
				return r, nil
			}
			return zkclient.Created{}, ctx.Err()
		})
	}
	made, _, err := s.create(ctx, p, data, creating{mode: zkclient.PersistentSequential, wait: wait})
	return made.Path, err
}

// withdrawFunc deletes the item p of an Offer whose ctx ended, in one
// attempt: after a lost answer a second one could not tell its own delete
// from a consumer's. It reports taken if a consumer had the item first,
// and an error when it cannot tell.
type withdrawFunc func(ctx context.Context, p string) (taken bool, err error)

// deleteItem is a Queue's withdrawFunc: one delete.
func (s *Session) deleteItem(ctx context.Context, p string) (taken bool, err error) {
	s.stats.deletes.Add(1)
	err = s.c.Delete(ctx, p, -1)
	if errors.Is(err, zkclient.ErrNoNode) {
		return true, nil
	}
	return false, err
}

// Take removes the item at the front of the queue and returns its data,
// waiting until there is one, ctx ends or the session is over. The front is
// the item whose name sorts first: the oldest, with Curator's names; among
// kazoo's, the lowest priority number first.
//
// It lists the queue with a child watch, then reads the front item and
// deletes it: if another consumer deleted it first, it tries the next
// one; if none is left, it waits for the watch (every waiting consumer
// wakes when an item is offered, and one gets it). A taken item costs one
// listing, one read and one delete.
//
// If the connection breaks while the delete is in flight and the item is
// gone once reconnected, the delete may have been this consumer's or
// another's: Take then returns the item's data with an error wrapping
// ErrWriteUnconfirmed, and the caller chooses (process it if a duplicate
// is harmless, drop it if a loss is).
func (q *Queue) Take(ctx context.Context) ([]byte, error) {
	if q.err != nil {
		return nil, q.err
	}
	start := q.s.obsNow()
	for {
		rd, err := q.s.read(ctx, q.dir, reading{op: readChildren, watch: true})
		kids, w := rd.kids, rd.w
		if errors.Is(err, zkclient.ErrNoNode) {
			rd, err = q.s.read(ctx, q.dir, reading{op: readStat, watch: true})
			w = rd.w
			if err == nil && rd.ok {
				w.stop()
				continue // made meanwhile: list it
			}
		}
		if err != nil {
			return nil, errorf("take from %s: %w", q.dir, err)
		}
		data, ok, err := q.takeFirst(ctx, items(kids))
		if ok || err != nil {
			w.stop()
			if err != nil {
				return data, errorf("take from %s: %w", q.dir, err)
			}
			q.s.taken(ctx, "queue", q.dir, start)
			return data, nil
		}
		select {
		case <-w.event():
		case <-ctx.Done():
			w.stop()
			return nil, errorf("take from %s: %w", q.dir, ctx.Err())
		case <-q.s.Done():
			return nil, errorf("take from %s: %w", q.dir, q.s.Err())
		}
	}
}

// Poll is Take without waiting: it returns false if the queue is empty.
func (q *Queue) Poll(ctx context.Context) ([]byte, bool, error) {
	if q.err != nil {
		return nil, false, q.err
	}
	start := q.s.obsNow()
	for {
		its, err := listItems(ctx, q.s, q.dir)
		if err != nil {
			return nil, false, errorf("poll %s: %w", q.dir, err)
		}
		if len(its) == 0 {
			return nil, false, nil
		}
		data, ok, err := q.takeFirst(ctx, its)
		if err != nil {
			return data, false, errorf("poll %s: %w", q.dir, err)
		}
		if ok {
			q.s.taken(ctx, "queue", q.dir, start)
			return data, true, nil
		}
		// Every item listed was taken by others meanwhile: list again.
	}
}

// Peek returns the data of the item at the front of the queue without
// taking it, or false if the queue is empty.
func (q *Queue) Peek(ctx context.Context) ([]byte, bool, error) {
	if q.err != nil {
		return nil, false, q.err
	}
	for {
		its, err := listItems(ctx, q.s, q.dir)
		if err != nil {
			return nil, false, errorf("peek %s: %w", q.dir, err)
		}
		if len(its) == 0 {
			return nil, false, nil
		}
		for _, it := range its {
			rd, err := q.s.read(ctx, q.dir+"/"+it, reading{op: readData})
			data := rd.data
			if errors.Is(err, zkclient.ErrNoNode) {
				continue // taken meanwhile
			}
			if err != nil {
				return nil, false, errorf("peek %s: %w", q.dir, err)
			}
			return data, true, nil
		}
	}
}

// Len returns the number of items in the queue.
func (q *Queue) Len(ctx context.Context) (int, error) {
	if q.err != nil {
		return 0, q.err
	}
	its, err := listItems(ctx, q.s, q.dir)
	if err != nil {
		return 0, errorf("length of %s: %w", q.dir, err)
	}
	return len(its), nil
}

// listItems lists the items of the work queue on dir in the order
// consumers take them (see items); a queue whose path does not exist has
// none.
func listItems(ctx context.Context, s *Session, dir string) ([]string, error) {
	rd, err := s.read(ctx, dir, reading{op: readChildren})
	kids := rd.kids
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return items(kids), nil
}

// takeFirst takes the first of its that no other consumer takes first.
func (q *Queue) takeFirst(ctx context.Context, its []string) ([]byte, bool, error) {
	for _, it := range its {
		data, ok, err := q.takeItem(ctx, q.dir+"/"+it)
		if ok || err != nil {
			return data, ok, err
		}
	}
	return nil, false, nil
}

// takeItem reads the item p and then deletes it: the delete decides whether
// this consumer got it. The data is read first, so an item is never deleted
// unread.
func (q *Queue) takeItem(ctx context.Context, p string) ([]byte, bool, error) {
	s := q.s
	rd, err := s.read(ctx, p, reading{op: readData})
	data := rd.data
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for {
		if err := s.awaitUp(ctx); err != nil {
			return nil, false, err
		}
		s.stats.deletes.Add(1)
		err := s.c.Delete(ctx, p, -1)
		switch {
		case err == nil:
			return data, true, nil
		case errors.Is(err, zkclient.ErrNoNode):
			return nil, false, nil // another consumer's delete came first
		case !errors.Is(err, ErrConnectionLoss) && ctx.Err() == nil:
			return nil, false, err
		}
		// The delete may have been applied (also when ctx ended with it in
		// flight): look whether the item is still there.
		// The sync makes the read see every write the server applied
		// before it, this session's lost delete included.
		cctx, cancel := s.cleanupContext(ctx)
		err = retry(cctx, s, func() error { return s.c.Sync(cctx, p) })
		if err == nil {
			_, err = s.read(cctx, p, reading{op: readStat})
		}
		cancel()
		switch {
		case err == nil && ctx.Err() != nil:
			return nil, false, ctx.Err() // not deleted: the item stays queued
		case err == nil:
			continue // not deleted: delete again
		case errors.Is(err, zkclient.ErrNoNode):
			return data, false, unconfirmed(p, ErrConnectionLoss)
		default:
			return data, false, unconfirmed(p, err)
		}
	}
}
