package zkrecipes

import (
	"context"
	"math/rand/v2"
	"time"
)

// The pauses of a backoff: the first is at most backoffMin, each next one
// twice the last, up to backoffMax.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// backoff spaces out the attempts of something that keeps failing (making
// a session, registering, campaigning): the pauses double from 100 ms up to
// 5 s, each drawn at random from the upper half of its bound, so that
// processes that failed together (an ensemble restarting, a network
// partition healing) do not come back in step. It starts over after
// reset, or by itself when the last pause ended more than twice the
// longest pause ago: failures that far apart are not a series. The zero
// value is ready to use; a backoff is not safe for concurrent use.
type backoff struct {
	bound time.Duration // the next pause's bound; 0: start over
	last  time.Time     // when the last pause ended
}

// reset makes the next pause the shortest.
func (b *backoff) reset() { b.bound = 0 }

// next returns the next pause and doubles the bound of the one after.
func (b *backoff) next() time.Duration {
	if b.bound == 0 || !b.last.IsZero() && time.Since(b.last) > 2*backoffMax {
		b.bound = backoffMin
	}
	d := b.bound/2 + rand.N(b.bound/2+1)
	b.bound = min(2*b.bound, backoffMax)
	return d
}

// wait pauses for d (from next), or until ctx ends, returning its error.
func (b *backoff) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		b.last = time.Now()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
