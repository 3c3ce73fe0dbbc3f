package zkrecipes

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStreamCoalesces: Next returns the latest state, never a backlog; a
// state the reader has seen is not news unless its generation is new; once
// ended, the state not yet read comes first, then the reason, every time.
func TestStreamCoalesces(t *testing.T) {
	ctx := context.Background()
	st := newStream(0, func(a, b int) bool { return a == b })
	next := func(want int) {
		t.Helper()
		if v, err := st.Next(ctx); v != want || err != nil {
			t.Fatalf("Next = %d, %v; want %d", v, err, want)
		}
	}
	nothing := func(what string) {
		t.Helper()
		// A lower bound: Next must not return within this time.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if v, err := st.Next(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Next = %d, %v; want nothing new", what, v, err)
		}
	}
	next(0) // the first state
	nothing("no change")
	st.emit(1, 0)
	st.emit(2, 0)
	st.emit(3, 0)
	next(3) // the latest, not 1
	nothing("after the latest")
	st.emit(3, 0)
	nothing("the state already seen")
	st.emit(4, 0)
	st.emit(3, 0)
	nothing("a change undone before Next")
	st.emit(3, 1)
	next(3) // a new generation of the same state
	st.emit(5, 1)
	errEnd := errors.New("end")
	st.end(errEnd)
	st.emit(6, 1) // after the end: ignored
	next(5)
	for range 2 {
		if _, err := st.Next(ctx); !errors.Is(err, errEnd) {
			t.Fatalf("Next after the end = %v, want its reason", err)
		}
	}
	st.end(ErrStreamClosed)
	if _, err := st.Next(ctx); !errors.Is(err, errEnd) {
		t.Fatalf("Next after a second end = %v, want the first reason", err)
	}
}
