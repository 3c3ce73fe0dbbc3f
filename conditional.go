package zkrecipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// ErrWriteUnconfirmed means the answer to a write was lost with the
// connection, and what the server showed once reconnected cannot tell
// whether the write was applied: it may have been, or another client's
// equal write may be what is there. The recipes never guess: a counter
// increment, a queue offer or a queue take that ends with this error may or
// may not have happened. The error also wraps its cause: ErrConnectionLoss,
// or the context's error when the caller stopped waiting for the answer and
// none came within the session timeout.
var ErrWriteUnconfirmed = errors.New("zkrecipes: write not confirmed: it may or may not have been applied")

func unconfirmed(p string, cause error) error {
	return fmt.Errorf("%w: %s (%w)", ErrWriteUnconfirmed, p, cause)
}

// conditionalWrite writes data to p if p's version is still version, or, with
// version -1, creates p as a persistent node (its missing parents as
// containers) if it does not exist. It reports whether the write was
// applied; a write refused because someone else wrote first is (false, nil).
//
// The write is sent once. After a connection loss its outcome is read from
// the server (after a sync, so the read sees every write the server applied
// before it, the lost one included): p unchanged means not applied, and the
// write is sent again; p changed to data other than ours at the very next
// version means someone else's write won; anything else cannot be told
// apart from our own write and is ErrWriteUnconfirmed.
func (s *Session) conditionalWrite(ctx context.Context, p string, data []byte, version int32) (bool, error) {
	for missing := 0; ; {
		// Sent while the connection is down, the write would fail unsent
		// and have to be read back.
		if err := s.awaitUp(ctx); err != nil {
			return false, err
		}
		err := s.sendWrite(ctx, p, data, version)
		switch {
		case err == nil:
			return true, nil
		case version < 0 && errors.Is(err, zkclient.ErrNodeExists),
			version >= 0 && (errors.Is(err, zkclient.ErrBadVersion) || errors.Is(err, zkclient.ErrNoNode)):
			return false, nil
		case version < 0 && errors.Is(err, zkclient.ErrNoNode) && missing < 3:
			missing++
			if err := s.makePath(ctx, parents(p), zkclient.Container, nil); err != nil {
				return false, err
			}
			continue
		case errors.Is(err, ErrWriteUnconfirmed), !errors.Is(err, ErrConnectionLoss):
			return false, err
		}
		// The lost write may have been applied: any failure from here on
		// leaves it unconfirmed.
		if err := s.awaitUp(ctx); err != nil {
			return false, unconfirmed(p, err)
		}
		if err := retry(ctx, s, func() error { return s.c.Sync(ctx, p) }); err != nil {
			return false, unconfirmed(p, err)
		}
		rd, err := s.read(ctx, p, reading{op: readData})
		now, st := rd.data, rd.st
		switch {
		case errors.Is(err, zkclient.ErrNoNode) && version < 0:
			continue // not created: create again
		case errors.Is(err, zkclient.ErrNoNode):
			return false, unconfirmed(p, ErrConnectionLoss) // written, by us or not, then deleted
		case err != nil:
			return false, unconfirmed(p, err)
		case version >= 0 && st.Version == version:
			continue // not written: write again
		case st.Version == version+1 && !bytes.Equal(now, data):
			return false, nil // someone else's write came first
		}
		return false, unconfirmed(p, ErrConnectionLoss)
	}
}

// sendWrite sends the write of conditionalWrite once and waits for its
// answer. If ctx ends first it still waits, bounded by the session timeout:
// a write that was applied is reported as applied, and one whose fate stays
// unknown as ErrWriteUnconfirmed, whatever became of ctx.
func (s *Session) sendWrite(ctx context.Context, p string, data []byte, version int32) error {
	// late judges a write whose answer came after ctx ended.
	late := func(cctx context.Context, err error) error {
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrConnectionLoss), cctx.Err() != nil:
			return unconfirmed(p, ctx.Err())
		default:
			return err // refused: not applied
		}
	}
	if version < 0 {
		_, _, err := s.create(ctx, p, data, creating{mode: zkclient.Persistent, wait: func(ctx context.Context, call *zkclient.Call[zkclient.Created]) (zkclient.Created, error) {
			return awaitLate(ctx, s, call, func(cctx context.Context, r zkclient.Created, err error) (zkclient.Created, error) {
				return r, late(cctx, err)
			})
		}})
		return err
	}
	_, err := awaitLate(ctx, s, s.c.SetAsync(p, data, version), func(cctx context.Context, st zkclient.Stat, err error) (zkclient.Stat, error) {
		return st, late(cctx, err)
	})
	return err
}
