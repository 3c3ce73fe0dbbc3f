package zkrecipes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Semaphore is a distributed counting semaphore with n permits on a
// ZooKeeper path, laid out like Apache Curator's InterProcessSemaphoreV2: a
// mutex at "<path>/locks" serialises acquirers, and each lease is an
// ephemeral sequential node "<path>/leases/_c_<uuid>-lease-<seq>". An
// acquirer takes the mutex, adds its lease node, and keeps the mutex until
// at most n lease nodes exist (every node under "<path>/leases" counts,
// whoever made it), so that never more than n leases are held at once: the
// only lease node not yet held is the mutex holder's, and a session that
// ends, even in the middle of an acquisition, takes its lease node and its
// mutex node with it.
//
// Curator does not record the number of permits anywhere, so participants
// that disagree on n would silently admit different numbers. zkrecipes
// records it as the data of "<path>" (the decimal number), written by the
// first acquirer and checked by every acquisition, before it queues and
// again while it holds the mutex: a Semaphore whose n differs gets an error
// wrapping ErrPermitsMismatch. ZooKeeper removes "<path>" (a container) some
// time after the semaphore was last used, and the record with it; from then
// on a new n may be chosen. Curator participants neither write nor check
// the record.
//
// A Semaphore value may hand out several leases at once; it is safe for
// concurrent use.
type Semaphore struct {
	s      *Session
	path   string
	n      int
	err    error  // invalid path or n, reported by every call
	data   []byte // each lease node's data (WithNodeData)
	locks  line   // the mutex that serialises acquirers
	leases string // the lease nodes' parent

	afterCheck func() // test hook: runs after TryAcquire's read-only check
}

// NewSemaphore returns a Semaphore with n permits on path for the session s.
// A bad path or an n below one is reported, without any network call, by
// Acquire. WithNodeData stores data in each lease node, where other
// processes can read who holds the permits (Curator's
// InterProcessSemaphoreV2.setNodeData does the same).
func NewSemaphore(s *Session, path string, n int, opts ...LockOption) *Semaphore {
	err := checkPath(path)
	if err == nil && (n < 1 || n > 1<<30) {
		err = errorf("semaphore %s: %w: %d permits", path, ErrInvalidArgument, n)
	}
	var cfg lockConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err == nil && cfg.grants == grantsAlways {
		err = errorf("semaphore %s: %w: WithGrants is for a Mutex, an RWMutex or an Election", path, ErrInvalidArgument)
	}
	return &Semaphore{
		s: s, path: path, n: n, err: err, data: cfg.data,
		locks:  line{s: s, dir: path + "/locks", kinds: lockKinds},
		leases: path + "/leases",
	}
}

// Lease is one permit of a Semaphore, held from Acquire's return until
// Release, or until Lost is closed.
type Lease struct {
	sem  *Semaphore
	node *protectedNode
	h    *nodeHold

	mu       sync.Mutex
	released bool
}

// Acquire waits until a permit is free and takes it, or until ctx ends or
// the session is over. When it returns an error, nothing of the attempt is
// left on the server, even if ctx was cancelled.
func (m *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	return m.take(ctx, false, "acquire")
}

// TryAcquire takes a permit if one is free and nobody else is acquiring at
// that moment, and returns an error wrapping ErrLocked otherwise, without
// waiting and without leaving a node behind. Like Curator's acquire with a
// zero timeout, it gives up rather than queue behind another acquirer that
// holds the semaphore's mutex (which that acquirer may keep until a permit
// is released). When every permit is taken, or another acquirer is queued,
// it answers with two listings and no write.
func (m *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	return m.take(ctx, true, "tryacquire")
}

func (m *Semaphore) take(ctx context.Context, try bool, op string) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	a := m.s.queued(ctx, "semaphore", m.path)
	t, err := m.acquire(ctx, try)
	if err != nil {
		a.abandoned(err)
		return nil, errorf("%s semaphore %s: %w", op, m.path, err)
	}
	return &Lease{sem: m, node: t, h: a.granted(m.s, t.path(), 0, 0)}, nil
}

func (m *Semaphore) acquire(ctx context.Context, try bool) (*protectedNode, error) {
	// Refuse a disagreeing n at once rather than after queueing for the
	// mutex; the check that counts is made again under the mutex.
	if rd, err := m.s.read(ctx, m.path, reading{op: readData}); err == nil && len(rd.data) > 0 && string(rd.data) != strconv.Itoa(m.n) {
		return nil, m.mismatch(rd.data)
	} else if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return nil, err
	}
	if try {
		// Answer without a write when every permit is taken or another
		// acquirer is queued for the mutex.
		if busy, err := m.busy(ctx); err != nil || busy {
			return nil, cmp.Or(err, ErrLocked)
		}
		if m.afterCheck != nil {
			m.afterCheck()
		}
	}
	lock, err := m.locks.enter(ctx, mutexKind, nil)
	if err != nil {
		return nil, err
	}
	if err := lock.wait(ctx, try); err != nil {
		lock.leave(ctx)
		return nil, err
	}
	t, err := m.underLock(ctx, try)
	if err := errors.Join(err, lock.leave(ctx)); err != nil {
		if t != nil {
			t.leave(ctx)
		}
		return nil, err
	}
	return t, nil
}

// busy reports whether a TryAcquire must give up at once: every permit is
// taken, or another acquirer is queued for the mutex.
func (m *Semaphore) busy(ctx context.Context) (bool, error) {
	for _, dir := range []string{m.leases, m.locks.dir} {
		rd, err := m.s.read(ctx, dir, reading{op: readChildren})
		kids := rd.kids
		if errors.Is(err, zkclient.ErrNoNode) {
			continue
		}
		if err != nil {
			return false, err
		}
		if dir == m.leases && len(kids) >= m.n || dir == m.locks.dir && len(kids) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// underLock runs while holding the semaphore's mutex: it checks the permit
// record, adds a lease node and waits until at most n lease nodes exist
// (with try, it gives up at once with ErrLocked instead of waiting).
func (m *Semaphore) underLock(ctx context.Context, try bool) (*protectedNode, error) {
	if err := m.checkPermits(ctx); err != nil {
		return nil, err
	}
	n := newProtectedNode(m.s, m.leases, "")
	t := &n
	if err := t.create(ctx, leaseKind.marker, m.data); err != nil {
		t.leave(ctx)
		return nil, err
	}
	kids, _, err := t.list(ctx)
	if err == nil && try && len(kids) > m.n {
		err = ErrLocked
	}
	for err == nil && slices.Contains(kids, t.name) && len(kids) > m.n {
		var rd reply
		rd, err = m.s.read(ctx, m.leases, reading{op: readChildren, watch: true})
		kids = rd.kids
		w := rd.w
		if err != nil || len(kids) <= m.n {
			if err == nil {
				w.stop()
			}
			break
		}
		select {
		case <-w.event():
		case <-ctx.Done():
			w.stop()
			err = ctx.Err()
		case <-m.s.Done():
			err = m.s.Err()
		}
	}
	if err == nil && !slices.Contains(kids, t.name) {
		if err = m.s.Err(); err == nil {
			err = fmt.Errorf("%w: %s", ErrNodeLost, t.path())
		}
	}
	if err != nil {
		t.leave(ctx)
		return nil, err
	}
	return t, nil
}

// checkPermits records n as the data of the semaphore's path, or checks it
// against the number recorded there.
func (m *Semaphore) checkPermits(ctx context.Context) error {
	want := strconv.Itoa(m.n)
	for {
		rd, err := m.s.read(ctx, m.path, reading{op: readData})
		data, st := rd.data, rd.st
		if err != nil {
			return err
		}
		if len(data) == 0 {
			_, err := m.s.setData(ctx, m.path, []byte(want), st.Version)
			if errors.Is(err, zkclient.ErrBadVersion) {
				continue // written meanwhile (perhaps by us, before a lost answer): read it
			}
			return err
		}
		if string(data) != want {
			return m.mismatch(data)
		}
		return nil
	}
}

func (m *Semaphore) mismatch(record []byte) error {
	return fmt.Errorf("%w: %s records %q permits, this Semaphore has %d", ErrPermitsMismatch, m.path, record, m.n)
}

// Release gives the permit back by deleting the lease node, even if ctx is
// already cancelled. It returns an error wrapping ErrNotHeld if called
// again, and one wrapping ErrSessionExpired if the session expired meanwhile
// (the lease was lost, not released).
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return errorf("release lease %s: %w", l.node.path(), ErrNotHeld)
	}
	l.released = true
	l.mu.Unlock()

	held := l.h.quit()
	err := l.node.leave(ctx)
	if err != nil {
		err = errorf("release lease %s: %w", l.node.path(), err)
	}
	l.h.released(held, err)
	return err
}

// Lost returns a channel that is closed when the lease is void: released,
// the session expired or was closed, the lease's node was deleted by
// someone else, or (in strict mode, see WithStrict) the connection was down
// long enough that the session may have expired. Watching for the deletion
// costs one watch on the lease node and one goroutine while the lease is
// held.
func (l *Lease) Lost() <-chan struct{} { return l.h.lost }
