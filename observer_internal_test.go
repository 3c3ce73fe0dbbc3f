package zkrecipes

import (
	"context"
	"errors"
	"testing"
)

// TestObserverNoAllocs checks that a Session without an Observer pays no
// allocation for the events of its acquisitions and queue items (the
// holding itself, holdNode, is the same with or without one).
func TestObserverNoAllocs(t *testing.T) {
	s := &Session{}
	ctx := context.Background()
	err := errors.New("refused")
	n := testing.AllocsPerRun(1000, func() {
		a := s.queued(ctx, "mutex", "/a")
		a.abandoned(err)
		s.offered(ctx, "queue", "/q")
		s.taken(ctx, "queue", "/q", s.obsNow())
	})
	if n != 0 {
		t.Errorf("the events of an acquisition and of two items allocate %v times without an Observer", n)
	}
}
