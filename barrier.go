package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Barrier is a gate on a ZooKeeper path, like Apache Curator's
// DistributedBarrier and kazoo's Barrier: while the node at path exists, Wait
// holds back every caller; Remove lets them all through.
//
// A Barrier is safe for concurrent use.
type Barrier struct {
	s    *Session
	path string
	err  error
}

// NewBarrier returns the Barrier on path for the session s. A bad path is
// reported, without any network call, by the first call.
func NewBarrier(s *Session, path string) *Barrier {
	return &Barrier{s: s, path: path, err: checkPath(path)}
}

// Set closes the gate by creating the barrier's node (a persistent node, so
// that it outlives the session that set it; missing parents are created as
// containers). Setting a barrier that is already set is not an error. If
// ctx ends before the server answers, a node made after all is deleted
// again: a Set that fails has not set the barrier.
func (b *Barrier) Set(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	_, _, err := b.s.create(ctx, b.path, nil, creating{mode: zkclient.Persistent, parents: true, resend: true, wait: b.s.createWait})
	if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
		return errorf("set barrier %s: %w", b.path, err)
	}
	return nil
}

// Remove opens the gate by deleting the barrier's node: every Wait returns.
// Removing a barrier that is not set is not an error.
func (b *Barrier) Remove(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if err := b.s.remove(ctx, b.path); err != nil {
		return errorf("remove barrier %s: %w", b.path, err)
	}
	return nil
}

// Wait returns nil once the barrier is not set: at once if it is not, or
// when its node is deleted. It returns early with an error when ctx ends or
// the session is over. It creates no node.
func (b *Barrier) Wait(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	// exists needs no permission on the barrier's node, which another
	// session may have set with an ACL of its own.
	if err := b.s.awaitDeleted(ctx, b.path, readStat, nil); err != nil {
		return errorf("wait on barrier %s: %w", b.path, err)
	}
	return nil
}

// readyNode is the name of the double barrier's "all have arrived" node.
const readyNode = "ready"

// DoubleBarrier lets n participants start and finish a task together, like
// Apache Curator's DistributedDoubleBarrier and kazoo's DoubleBarrier, with
// their layout: each participant is an ephemeral node "<path>/<uuid>", and
// the participant that sees n of them creates "<path>/ready". Enter returns
// once n participants have entered; Leave returns once all participants
// have left. n is a threshold, not a limit: more may enter.
//
// zkrecipes makes "ready" ephemeral (Curator and kazoo make it persistent),
// so that a round whose participants crashed without leaving leaves nothing
// behind that would let the next round through at once; participants that
// were waiting when it was created have been told already.
//
// A DoubleBarrier value is one participant, entered at most once at a time.
// Its methods are safe to call concurrently.
type DoubleBarrier struct {
	s    *Session
	path string
	n    int
	err  error

	mu   sync.Mutex
	busy bool   // entering, entered or leaving
	name string // our node's name while entered
}

// NewDoubleBarrier returns a participant of the double barrier for n
// participants on path, for the session s. A bad path or an n below one is
// reported, without any network call, by the first call.
func NewDoubleBarrier(s *Session, path string, n int) *DoubleBarrier {
	err := checkPath(path)
	if err == nil && n < 1 {
		err = errorf("double barrier %s: %w: %d participants", path, ErrInvalidArgument, n)
	}
	return &DoubleBarrier{s: s, path: path, n: n, err: err}
}

// Enter adds this participant and waits until n participants have entered
// (counting this one), ctx ends, or the session is over. When it returns an
// error, this participant's node is deleted even if ctx was cancelled; if
// the others had already counted it, they may have passed.
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	b.mu.Lock()
	if b.busy {
		b.mu.Unlock()
		return errorf("enter double barrier %s: %w", b.path, ErrBusy)
	}
	b.busy = true
	b.mu.Unlock()

	name := uuid.NewString()
	err := b.enter(ctx, name)

	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.busy = false
		if b.s.Err() == nil {
			cctx, cancel := b.s.cleanupContext(ctx)
			defer cancel()
			b.s.remove(cctx, b.path+"/"+name)
		}
		return errorf("enter double barrier %s: %w", b.path, err)
	}
	b.name = name
	return nil
}

func (b *DoubleBarrier) enter(ctx context.Context, name string) error {
	s, ready := b.s, b.path+"/"+readyNode
	if err := s.makePath(ctx, append(parents(b.path), b.path), zkclient.Container, nil); err != nil {
		return err
	}
	// Watch "ready" before our node exists: whoever counts us and creates
	// it does so after this watch is set, so we cannot miss it.
	rd, err := s.read(ctx, ready, reading{op: readStat, watch: true})
	open, w := rd.ok, rd.w
	if err != nil {
		return err
	}
	defer w.stop() // a no-op once it fired
	if err := createEphemeral(ctx, s, b.path+"/"+name, nil); err != nil {
		return err
	}
	if open {
		return nil // a round is under way: join it
	}
	rd, err = s.read(ctx, b.path, reading{op: readChildren})
	kids := rd.kids
	if err != nil {
		return err
	}
	if len(members(kids)) >= b.n {
		_, lost, err := s.create(ctx, ready, nil, creating{mode: zkclient.Ephemeral, parents: true, resend: true, wait: s.createWait})
		if err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			if lost {
				// An attempt whose answer was lost may have made it.
				s.removeOwnLater(ready)
			}
			return err
		}
		return nil
	}
	select {
	case ev := <-w.event():
		if ev.Type == zkclient.EventNodeCreated {
			return nil
		}
		if err := s.Err(); err != nil {
			return err
		}
		return errorf("unexpected %v on %s", ev.Type, ready)
	case <-ctx.Done():
		return ctx.Err()
	case <-s.Done():
		return s.Err()
	}
}

// Leave removes this participant and waits until every participant has left
// (their nodes are gone), ctx ends, or the session is over. Whatever it
// returns, this participant's node is deleted; on an error the others may
// still be waiting for each other. It returns an error wrapping ErrNotHeld
// if this participant has not entered.
//
// As in ZooKeeper's recipe, the participant with the lowest node name waits
// for each of the others to go and deletes its node last; the others delete
// theirs at once and wait for the lowest one: each departure wakes one
// participant, and the last wakes the others.
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	b.mu.Lock()
	name := b.name
	if name == "" {
		b.mu.Unlock()
		return errorf("leave double barrier %s: %w", b.path, ErrNotHeld)
	}
	b.name = "" // a second Leave is refused
	b.mu.Unlock()

	err := b.leave(ctx, name)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy = false
	if err != nil {
		if b.s.Err() == nil {
			cctx, cancel := b.s.cleanupContext(ctx)
			defer cancel()
			b.s.remove(cctx, b.path+"/"+name)
		}
		return errorf("leave double barrier %s: %w", b.path, err)
	}
	return nil
}

func (b *DoubleBarrier) leave(ctx context.Context, name string) error {
	s, mine := b.s, b.path+"/"+name
	// The round is over for us: the next one must gather n anew.
	if err := s.remove(ctx, b.path+"/"+readyNode); err != nil {
		return err
	}
	deleted := false
	for {
		rd, err := s.read(ctx, b.path, reading{op: readChildren})
		kids := rd.kids
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		ms := members(kids)
		slices.Sort(ms)
		if len(ms) == 0 {
			return nil
		}
		i := slices.Index(ms, name)
		if i < 0 && !deleted {
			if err := s.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%w: %s", ErrNodeLost, mine)
		}
		var wait string
		switch {
		case len(ms) == 1 && i == 0:
			return s.remove(ctx, mine)
		case i == 0:
			wait = ms[len(ms)-1] // lowest: wait for the highest to go
		default:
			if !deleted {
				if err := s.remove(ctx, mine); err != nil {
					return err
				}
				deleted = true
			}
			wait = ms[0] // wait for the lowest, which goes last
		}
		if err := s.awaitDeleted(ctx, b.path+"/"+wait, readStat, nil); err != nil {
			return err
		}
	}
}

// members drops the "ready" node from a double barrier's children.
func members(kids []string) []string {
	return slices.DeleteFunc(slices.Clone(kids), func(k string) bool { return k == readyNode })
}
