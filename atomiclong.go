package zkrecipes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// AtomicLong is a 64-bit integer in one ZooKeeper node, changed by
// optimistic compare-and-set: each change reads the value and its version
// and writes the new value only if the version is unchanged, trying again
// when someone else wrote first. It is compatible with Apache Curator's
// DistributedAtomicLong: the node's data is the value as 8 bytes,
// big-endian; a missing node (or one with no data) reads as 0; the node is
// persistent, made by the first change, its missing parents as containers.
//
// Under heavy contention each change may take many tries (every try that
// fails means another one succeeded). WithPromotion bounds that the way
// Curator's PromotedToLock does: after a number of failed tries, a change
// takes a Mutex and goes on trying while holding it, so the promoted
// changes queue instead of colliding.
//
// An AtomicLong holds no state of its own; it is safe for concurrent use.
type AtomicLong struct {
	s     *Session
	path  string
	err   error
	lock  string // promotion's mutex path, "" for none
	after int    // failed tries before promotion
}

// AtomicOption configures an AtomicLong.
type AtomicOption func(*AtomicLong)

// WithPromotion makes a change that failed tries optimistic tries in a row
// take the Mutex on lockPath (Curator's PromotedToLock.lockPath, with which
// it shares the lock) and go on trying while it holds it. Changes made
// without promotion (or by clients that do not promote) still compete
// with the promoted ones, so the mutex bounds the collisions without
// being needed for correctness.
func WithPromotion(lockPath string, tries int) AtomicOption {
	return func(a *AtomicLong) {
		a.lock, a.after = lockPath, tries
		if err := checkPath(lockPath); err != nil && a.err == nil {
			a.err = err
		} else if tries < 1 && a.err == nil {
			a.err = errorf("atomic long %s: %w: promotion after %d tries", a.path, ErrInvalidArgument, tries)
		}
	}
}

// NewAtomicLong returns the AtomicLong on path for the session s. A bad path
// or option is reported, without any network call, by every method.
func NewAtomicLong(s *Session, path string, opts ...AtomicOption) *AtomicLong {
	a := &AtomicLong{s: s, path: path, err: checkPath(path)}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Get returns the current value (0 if the node does not exist), as read
// from the server the session is connected to.
func (a *AtomicLong) Get(ctx context.Context) (int64, error) {
	if a.err != nil {
		return 0, a.err
	}
	v, _, err := a.read(ctx)
	if err != nil {
		return 0, errorf("atomic long %s: %w", a.path, err)
	}
	return v, nil
}

// read returns the value and the node's version, -1 if it does not exist.
func (a *AtomicLong) read(ctx context.Context) (int64, int32, error) {
	rd, err := a.s.read(ctx, a.path, reading{op: readData})
	data, st := rd.data, rd.st
	if errors.Is(err, zkclient.ErrNoNode) {
		return 0, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	v, err := decodeInt64(data)
	return v, st.Version, err
}

// Add adds delta to the value and returns the new value. No addition is
// lost or made twice: each try writes only if nobody wrote since it read,
// and it tries until one write is applied, ctx ends or the session is
// over. A try costs a read and a conditional write. If the connection
// breaks while a write is in flight and what the server shows afterwards
// cannot tell whether it was applied, Add returns an error wrapping
// ErrWriteUnconfirmed and does not try again.
func (a *AtomicLong) Add(ctx context.Context, delta int64) (int64, error) {
	if a.err != nil {
		return 0, a.err
	}
	v, err := a.update(ctx, func(old int64) (int64, bool) { return old + delta, true })
	if err != nil {
		return 0, errorf("atomic long %s: add %d: %w", a.path, delta, err)
	}
	return v, nil
}

// CompareAndSwap sets the value to new if it is old, and reports whether it
// did. A concurrent write that leaves the value at old does not make it
// fail: it reads again and retries. A missing node has the value 0.
func (a *AtomicLong) CompareAndSwap(ctx context.Context, old, new int64) (bool, error) {
	if a.err != nil {
		return false, a.err
	}
	swapped := false
	_, err := a.update(ctx, func(cur int64) (int64, bool) {
		swapped = cur == old
		return new, swapped
	})
	if err != nil {
		return false, errorf("atomic long %s: compare and swap: %w", a.path, err)
	}
	return swapped, nil
}

// Set sets the value to v whatever it was (Curator's forceSet), creating the
// node if it does not exist. It retries across connection loss.
func (a *AtomicLong) Set(ctx context.Context, v int64) error {
	if a.err != nil {
		return a.err
	}
	if err := a.s.forceSet(ctx, a.path, encodeInt64(v)); err != nil {
		return errorf("atomic long %s: set: %w", a.path, err)
	}
	return nil
}

// Initialize creates the node with the value v if it does not exist, and
// reports whether it did (Curator's initialize).
func (a *AtomicLong) Initialize(ctx context.Context, v int64) (bool, error) {
	if a.err != nil {
		return false, a.err
	}
	ok, err := a.s.conditionalWrite(ctx, a.path, encodeInt64(v), -1)
	if err != nil {
		return false, errorf("atomic long %s: initialize: %w", a.path, err)
	}
	return ok, nil
}

// update applies f to the value until one conditional write of its result
// is applied, or f declines (returns false). It returns the value written
// (or, when f declined, the value read).
func (a *AtomicLong) update(ctx context.Context, f func(int64) (int64, bool)) (int64, error) {
	for tries := 0; ; tries++ {
		if a.lock != "" && tries == a.after {
			return a.updateLocked(ctx, f)
		}
		v, done, err := a.try(ctx, f)
		if done || err != nil {
			return v, err
		}
	}
}

// try makes one read and, unless f declines, one conditional write. done
// reports that the write was applied or f declined.
func (a *AtomicLong) try(ctx context.Context, f func(int64) (int64, bool)) (v int64, done bool, err error) {
	cur, version, err := a.read(ctx)
	if err != nil {
		return 0, false, err
	}
	next, ok := f(cur)
	if !ok {
		return cur, true, nil
	}
	applied, err := a.s.conditionalWrite(ctx, a.path, encodeInt64(next), version)
	return next, applied, err
}

// updateLocked is update under the promotion's mutex. The mutex's release
// cannot undo a change made under it, so its error is not reported: a node
// it could not delete goes in the background, or with the session.
func (a *AtomicLong) updateLocked(ctx context.Context, f func(int64) (int64, bool)) (int64, error) {
	m := NewMutex(a.s, a.lock)
	if err := m.Lock(ctx); err != nil {
		return 0, err
	}
	defer m.Unlock(ctx)
	for {
		v, done, err := a.try(ctx, f)
		if done || err != nil {
			return v, err
		}
	}
}

func encodeInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func decodeInt64(data []byte) (int64, error) {
	switch len(data) {
	case 0:
		return 0, nil // Curator reads no data as 0
	case 8:
		return int64(binary.BigEndian.Uint64(data)), nil
	}
	return 0, fmt.Errorf("%w: %d bytes, an atomic long has 8", ErrCorruptValue, len(data))
}
