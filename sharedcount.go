package zkrecipes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ErrCorruptValue means a counter's node holds data that is not a value of
// the counter's layout (4 bytes for a SharedCount, 8 or none for an
// AtomicLong).
var ErrCorruptValue = errors.New("zkrecipes: counter node holds data of the wrong length")

// SharedCount is a 32-bit integer shared through one ZooKeeper node,
// compatible with Apache Curator's SharedCount: the node's data is the
// value as 4 bytes, big-endian, and the node is persistent (its missing
// parents are made as containers). Every change goes through the node's
// version, so a compare-and-set (TrySetCount) fails if anyone wrote since
// the value it was given was read.
//
// A SharedCount holds no state of its own and costs nothing while unused;
// Watch costs one data watch. It is safe for concurrent use.
type SharedCount struct {
	s    *Session
	path string
	seed int32
	err  error
}

// VersionedCount is a SharedCount's value and the version of the node it was
// read from: what TrySetCount compares against.
type VersionedCount struct {
	Value   int32
	Version int32
}

// NewSharedCount returns the SharedCount on path for the session s. seed is
// its value if the node does not exist yet: the first call that reads the
// count creates the node with it, as Curator's SharedCount.start does. A bad
// path is reported, without any network call, by every method.
func NewSharedCount(s *Session, path string, seed int32) *SharedCount {
	return &SharedCount{s: s, path: path, seed: seed, err: checkPath(path)}
}

// Count returns the current value and its version, read from the server
// the session is connected to (which may lag the leader slightly, as every
// ZooKeeper read). If the node does not exist, it is created with the seed.
func (c *SharedCount) Count(ctx context.Context) (VersionedCount, error) {
	if c.err != nil {
		return VersionedCount{}, c.err
	}
	v, err := c.read(ctx)
	if err != nil {
		return VersionedCount{}, errorf("shared count %s: %w", c.path, err)
	}
	return v, nil
}

func (c *SharedCount) read(ctx context.Context) (VersionedCount, error) {
	for {
		rd, err := c.s.read(ctx, c.path, reading{op: readData})
		data, st := rd.data, rd.st
		if errors.Is(err, zkclient.ErrNoNode) {
			if _, _, err := c.s.create(ctx, c.path, encodeInt32(c.seed), creating{mode: zkclient.Persistent, parents: true, resend: true, existing: true}); err != nil {
				return VersionedCount{}, err
			}
			continue
		}
		if err != nil {
			return VersionedCount{}, err
		}
		v, err := decodeInt32(data)
		if err != nil {
			return VersionedCount{}, err
		}
		return VersionedCount{Value: v, Version: st.Version}, nil
	}
}

// TrySetCount sets the value to n if the node is still at prev.Version,
// the version prev was read at (from Count or Watch), and reports whether
// it did. It returns false, and no error, when someone else wrote first:
// read again and retry to build an increment that loses nothing. One
// write, no read (unless the connection breaks: then the outcome is read
// back, and if it cannot be told the error wraps ErrWriteUnconfirmed).
func (c *SharedCount) TrySetCount(ctx context.Context, n int32, prev VersionedCount) (bool, error) {
	if c.err != nil {
		return false, c.err
	}
	if prev.Version < 0 {
		return false, errorf("shared count %s: %w: version %d", c.path, ErrInvalidArgument, prev.Version)
	}
	ok, err := c.s.conditionalWrite(ctx, c.path, encodeInt32(n), prev.Version)
	if err != nil {
		return false, errorf("shared count %s: %w", c.path, err)
	}
	return ok, nil
}

// SetCount sets the value to n whatever it was, creating the node if it does
// not exist. It retries across connection loss (writing the same value
// twice is harmless, though it may overwrite a write made in between).
func (c *SharedCount) SetCount(ctx context.Context, n int32) error {
	if c.err != nil {
		return c.err
	}
	if err := c.s.forceSet(ctx, c.path, encodeInt32(n)); err != nil {
		return errorf("shared count %s: %w", c.path, err)
	}
	return nil
}

// forceSet writes data to p whatever its version, creating p if missing.
func (s *Session) forceSet(ctx context.Context, p string, data []byte) error {
	for {
		_, err := s.setData(ctx, p, data, -1)
		if !errors.Is(err, zkclient.ErrNoNode) {
			return err
		}
		if _, _, err := s.create(ctx, p, data, creating{mode: zkclient.Persistent, parents: true, resend: true, existing: true}); err != nil {
			return err
		}
		// Created with our data, or by someone else meanwhile: write ours
		// over it, as a set that came later would.
	}
}

// Watch follows the count as a [Stream]: its first Next returns the count
// when the watch was set, and each later one the count after a change
// (a new version, even of the same value), the changes made before Next
// was called merged into the latest. If the node is deleted, the stream
// waits for it to be made again. A value that is not a count is skipped,
// and logged.
//
// Watch reads the count before it returns, creating the node with the
// seed if it does not exist (ctx bounds that read only); it returns an
// error for an invalid path or when that read fails. The stream costs one
// data watch.
func (c *SharedCount) Watch(ctx context.Context) (*Stream[VersionedCount], error) {
	what := "watch shared count " + c.path
	if c.err != nil {
		return nil, errorf("%s: %w", what, c.err)
	}
	first, err := c.read(ctx) // creates the node if missing
	if err != nil {
		return nil, errorf("%s: %w", what, err)
	}
	st := newStream(first, func(a, b VersionedCount) bool { return a == b })
	st.run(c.s, what, func(ctx context.Context) error { return c.watch(ctx, st) })
	return st, nil
}

// watch follows the count for st until ctx ends or an error stops it.
func (c *SharedCount) watch(ctx context.Context, st *Stream[VersionedCount]) error {
	for {
		rd, err := c.s.read(ctx, c.path, reading{op: readData, watch: true})
		data, cur, w := rd.data, rd.st, rd.w
		if errors.Is(err, zkclient.ErrNoNode) {
			rd, err = c.s.read(ctx, c.path, reading{op: readStat, watch: true})
			w = rd.w
			if err == nil && rd.ok {
				w.stop()
				continue // made again meanwhile: read it
			}
		} else if err == nil {
			if v, derr := decodeInt32(data); derr != nil {
				c.s.log.Warn("zkrecipes: shared count watch: value skipped", "path", c.path, "err", derr)
			} else {
				st.emit(VersionedCount{Value: v, Version: cur.Version}, 0)
			}
		}
		if err != nil {
			return err
		}
		select {
		case <-w.event():
		case <-ctx.Done():
			w.stop()
			return ctx.Err()
		case <-c.s.Done():
			return c.s.Err()
		}
	}
}

func encodeInt32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func decodeInt32(data []byte) (int32, error) {
	if len(data) != 4 {
		return 0, fmt.Errorf("%w: %d bytes, a shared count has 4", ErrCorruptValue, len(data))
	}
	return int32(binary.BigEndian.Uint32(data)), nil
}
