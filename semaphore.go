package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// leaseKind is Curator InterProcessSemaphoreV2's lease node name,
// "_c_<uuid>-lease-<seq>".
var leaseKind = kind{marker: "lease-"}

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
	err    error // invalid path or n, reported by every call
	locks  queue
	leases queue
}

// NewSemaphore returns a Semaphore with n permits on path for the session s.
// A bad path or an n below one is reported, without any network call, by
// Acquire.
func NewSemaphore(s *Session, path string, n int) *Semaphore {
	err := checkPath(path)
	if err == nil && (n < 1 || n > 1<<30) {
		err = fmt.Errorf("zkrecipes: semaphore %s: %w: %d permits", path, ErrInvalidArgument, n)
	}
	return &Semaphore{
		s: s, path: path, n: n, err: err,
		locks:  queue{s: s, dir: path + "/locks", kinds: lockKinds},
		leases: queue{s: s, dir: path + "/leases"},
	}
}

// Lease is one permit of a Semaphore, held from Acquire's return until
// Release, or until Lost is closed.
type Lease struct {
	sem *Semaphore
	t   *ticket

	mu       sync.Mutex
	lost     <-chan struct{}
	release  func()
	released bool
}

// Acquire waits until a permit is free and takes it, or until ctx ends or
// the session is over. When it returns an error, nothing of the attempt is
// left on the server, even if ctx was cancelled.
func (m *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	t, err := m.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("zkrecipes: acquire semaphore %s: %w", m.path, err)
	}
	l := &Lease{sem: m, t: t}
	l.lost, l.release = m.s.hold()
	return l, nil
}

func (m *Semaphore) acquire(ctx context.Context) (*ticket, error) {
	// Refuse a disagreeing n at once rather than after queueing for the
	// mutex; the check that counts is made again under the mutex.
	if data, _, err := m.s.getData(ctx, m.path); err == nil && len(data) > 0 && string(data) != strconv.Itoa(m.n) {
		return nil, m.mismatch(data)
	} else if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return nil, err
	}
	lock, err := m.locks.enter(ctx, mutexKind, nil)
	if err != nil {
		return nil, err
	}
	if err := lock.wait(ctx, false); err != nil {
		lock.leave(ctx)
		return nil, err
	}
	t, err := m.underLock(ctx)
	if err := errors.Join(err, lock.leave(ctx)); err != nil {
		if t != nil {
			t.leave(ctx)
		}
		return nil, err
	}
	return t, nil
}

// underLock runs while holding the semaphore's mutex: it checks the permit
// record, adds a lease node and waits until at most n lease nodes exist.
func (m *Semaphore) underLock(ctx context.Context) (*ticket, error) {
	if err := m.checkPermits(ctx); err != nil {
		return nil, err
	}
	t, err := m.leases.enter(ctx, leaseKind, nil)
	if err != nil {
		return nil, err
	}
	kids, _, err := t.list(ctx)
	for err == nil && slices.Contains(kids, t.name) && len(kids) > m.n {
		var w watched
		if kids, w, err = m.s.childrenW(ctx, m.leases.dir); err != nil || len(kids) <= m.n {
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
		data, st, err := m.s.getData(ctx, m.path)
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
		return fmt.Errorf("zkrecipes: release lease %s: %w", l.t.path(), ErrNotHeld)
	}
	l.released = true
	l.mu.Unlock()

	l.release()
	if err := l.t.leave(ctx); err != nil {
		return fmt.Errorf("zkrecipes: release lease %s: %w", l.t.path(), err)
	}
	return nil
}

// Lost returns a channel that is closed when the lease is void: released,
// the session expired or was closed, or (in strict mode, see WithStrict) the
// connection was down long enough that the session may have expired.
func (l *Lease) Lost() <-chan struct{} { return l.lost }
