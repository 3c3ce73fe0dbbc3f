package zkrecipes

import (
	"context"
	"errors"
	"sync"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// LockOption configures a Mutex, an RWMutex or a Semaphore (and, with
// WithGrants only, an Election).
type LockOption func(*lockConfig)

type lockConfig struct {
	data   []byte
	grants grantMode // grantsOnContention unless an option said otherwise
}

// WithNodeData stores data in this contender's node, where other processes
// inspecting the queue can read it (Curator stores the client's address
// there; zkr stores its --id). It does not affect the lock.
func WithNodeData(data []byte) LockOption {
	return func(c *lockConfig) { c.data = append([]byte(nil), data...) }
}

// WithGrants makes the contender take grants from its session's first Lock
// on the path: the route is set up (two round trips) before the first node
// is queued, rather than after the first wait. A Semaphore given
// WithGrants reports ErrInvalidArgument.
//
// Grants are how a Mutex (an Election, an RWMutex) hands the lock over. A
// holder that knows the contender right after it, and that contender
// takes grants, releases with one multi that deletes its node and creates
// a grant for that contender, which then holds on the grant's watch
// event, without reading the line. A handoff then costs the
// holder's multi and one event, where otherwise it costs the holder's
// delete, one event and the next holder's listing: one round trip less on
// the critical path, and one listing of the line per ten handoffs instead
// of one per handoff (a holder that listed grants on to up to nine in
// turn). It pays where a round trip is long against the server's work
// (hosts apart): through a delayed link, a chain of handoffs ran 1.5 to
// 1.7 times as fast and the contended loop 1.5 to 1.8 times; on loopback,
// about even with 10 contenders and up to 1.36 times as fast with 100 and
// 500 (docs/benchmarks.md).
//
// By default a contender takes grants when its session has a grant route
// on the lock's path: a session sets one up, in the background, the first
// time one of its contenders there has to wait, and the contenders it
// queues there later take grants. An uncontended lock costs nothing more.
// A route costs, on the server, a container node under the lock's path
// with ".grants" appended (the first route there also makes that node, one
// write per missing node of its path) holding an ephemeral node of the
// session's, made in one multi; and, in the client, one recursive watch
// (ZooKeeper 3.6 or later) and one goroutine. A route that no contender of
// the session has used for a minute (WithGrantLinger) is taken down (its
// watch removed, its ephemeral node deleted: two requests), and the
// server removes the container at its next container check (every minute
// by default); a session's routes end with it. So a service that locks many paths keeps
// routes only on the paths it contends for now.
//
// Only contenders that take grants, of the holder's own kind, are granted,
// and an RWMutex writer's readers: a writer followed by readers grants
// every one of them that takes grants, up to the next writer (16 at most),
// in its one multi, and they hold together. Others on the same path
// (Curator's, kazoo's, a zkrecipes contender without a route or
// WithoutGrants, an RWMutex writer after a Mutex holder) are passed over,
// and take the lock by listing, as always; readers grant nothing. Readers
// granted by a writer held 1.5 to 1.6 times as fast as by listing through
// a delayed link (1 and 10 readers), but 0.77 to 0.90 as fast on loopback
// in most runs. Tokens are the same with or without grants (see
// Mutex.Token). A grant node is ephemeral, owned by the granter's session,
// and deleted by the heir: in its release's multi, or at once when the
// heir had left before the grant came. One whose heir's session ended
// before that stays until the granter's session ends, as does one made for
// a node whose deletion was left to the background (after a lost answer)
// once the route was taken down.
func WithGrants() LockOption {
	return func(c *lockConfig) { c.grants = grantsAlways }
}

// WithoutGrants makes the contender neither take grants nor grant: it
// always holds on a listing, its session sets up no grant route for it,
// and its release is a plain delete, after which the next contender lists.
// See WithGrants.
func WithoutGrants() LockOption {
	return func(c *lockConfig) { c.grants = grantsNever }
}

// grantMode is when a line's contenders take grants.
type grantMode int

const (
	grantsNever        grantMode = iota // never (a Semaphore's line, WithoutGrants)
	grantsOnContention                  // once the session has waited there (the default)
	grantsAlways                        // from the first Lock (WithGrants)
)

// seat is one contender's state in a queue — idle, acquiring, or holding
// one ticket — shared by Mutex, RWMutex and Election, which differ only in
// the kinds of node they queue and in how a holding is watched.
type seat struct {
	q    line
	err  error // invalid path (or argument), reported by every call
	data []byte

	mu     sync.Mutex
	busy   bool // acquiring or holding
	reader bool // what is held or being acquired
	held   *ticket
	// hold is the holding of held: it ends when the session's holdings are
	// void and also when someone else deletes the held node (a lock whose
	// node an operator removed is no longer exclusive).
	hold *nodeHold

	acq acquiring // the acquisition under way, told to the Observer
}

func (st *seat) init(s *Session, path string, kinds []kind, opts []LockOption) {
	cfg := lockConfig{grants: grantsOnContention}
	for _, o := range opts {
		o(&cfg)
	}
	st.q = line{s: s, dir: path, kinds: kinds, grants: cfg.grants}
	st.err = checkPath(path)
	st.data = cfg.data
}

// acquire queues a node of kind k and waits until it holds (with try,
// returns ErrLocked instead of waiting). op names the operation in errors.
func (st *seat) acquire(ctx context.Context, k kind, try bool, op string) error {
	if st.err != nil {
		return st.err
	}
	st.mu.Lock()
	switch {
	case st.held != nil && st.reader && !k.reader:
		st.mu.Unlock()
		return errorf("%s %s: %w", op, st.q.dir, ErrUpgrade)
	case st.held != nil && !st.reader && k.reader:
		st.mu.Unlock()
		return errorf("%s %s: %w: the write lock is held and cannot be downgraded (Unlock, then RLock)", op, st.q.dir, ErrBusy)
	case st.busy:
		st.mu.Unlock()
		return errorf("%s %s: %w", op, st.q.dir, ErrBusy)
	}
	st.busy, st.reader = true, k.reader
	st.queue(ctx, k)
	st.mu.Unlock()

	t, err := st.take(ctx, k, try)
	return st.settle(ctx, t, err, op)
}

// settle ends an acquisition: t holds, and its loss is watched for from
// now on, or the acquisition failed with err and the seat is idle.
func (st *seat) settle(ctx context.Context, t *ticket, err error, op string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		st.busy = false
		st.acq.abandoned(err)
		return errorf("%s %s: %w", op, st.q.dir, err)
	}
	st.held = t
	st.acq.ev.ByGrant = t.byGrant
	st.hold = st.acq.granted(st.q.s, t.path(), t.ahead, t.token)
	return nil
}

// queue tells the Observer, if any, that an acquisition of kind k began.
func (st *seat) queue(ctx context.Context, k kind) {
	st.acq = st.q.s.queued(ctx, recipeName(k), st.q.dir)
}

func (st *seat) take(ctx context.Context, k kind, try bool) (*ticket, error) {
	if try {
		// A node queued that would block ours means the lock is taken:
		// answer without a write.
		cs, err := st.q.contenders(ctx)
		if err == nil && blocker(append(cs, contender{reader: k.reader}), len(cs)) >= 0 {
			return nil, ErrLocked
		}
	}
	t, err := st.q.enter(ctx, k, st.data)
	if err != nil {
		return nil, err
	}
	if err := t.wait(ctx, try); err != nil {
		t.release(ctx)
		return nil, err
	}
	return t, nil
}

// requeue releases the holding and queues again at the back, in one write,
// then waits to hold again (see Mutex.Requeue).
func (st *seat) requeue(ctx context.Context, op string) error {
	if st.err != nil {
		return st.err
	}
	st.mu.Lock()
	t, h := st.held, st.hold
	if t == nil {
		st.mu.Unlock()
		return errorf("%s %s: %w", op, st.q.dir, ErrNotHeld)
	}
	st.held, st.hold = nil, nil // still busy: acquiring again
	st.mu.Unlock()
	held := h.drop()
	defer t.unregister()

	n, err := t.requeue(ctx, st.data)
	h.settle(err == nil)
	released := err
	switch {
	case errors.Is(err, ErrConnectionLoss):
		// Not applied: release the old node and queue anew, in two writes.
		released = t.release(ctx)
		if err = released; err == nil {
			n, err = st.q.enter(ctx, t.kind, st.data)
		}
	case err != nil:
		// The multi failed, or whether it was applied is not known: the
		// old node leaves too, if it is still there, in the background
		// (its session may not be connected, and ctx may have ended).
		st.q.s.removeLater(t.remove)
	}
	h.released(held, released)
	st.mu.Lock()
	st.queue(ctx, t.kind)
	st.mu.Unlock()
	if err == nil {
		if err = n.wait(ctx, false); err != nil {
			n.release(ctx)
		}
	}
	return st.settle(ctx, n, err, op)
}

// leave releases what is held, if it is of the reader kind given.
func (st *seat) leave(ctx context.Context, reader bool, op string) error {
	if st.err != nil {
		return st.err
	}
	st.mu.Lock()
	t, h := st.held, st.hold
	if t == nil || st.reader != reader {
		what := "nothing"
		if t != nil {
			what = "the write lock"
			if st.reader {
				what = "the read lock"
			}
		}
		st.mu.Unlock()
		return errorf("%s %s: %w (this value holds %s)", op, st.q.dir, ErrNotHeld, what)
	}
	st.held, st.hold, st.busy = nil, nil, false
	st.mu.Unlock()

	held := h.drop()
	err := t.release(ctx)
	h.settle(err == nil)
	h.released(held, err)
	if err != nil {
		return errorf("%s %s: %w", op, st.q.dir, err)
	}
	return nil
}

func (st *seat) token() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held == nil {
		return 0
	}
	return st.held.token
}

func (st *seat) lostChan() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return st.hold.lost
}

// heldOp returns a transaction operation that checks the held node still
// exists, or one that fails the transaction with ErrNotHeld.
func (st *seat) heldOp() zkclient.Op {
	if st.err != nil {
		return zkclient.FailedOp(st.err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held == nil {
		return zkclient.FailedOp(errorf("%s: %w", st.q.dir, ErrNotHeld))
	}
	return st.q.s.c.CheckOp(st.held.path(), -1)
}
