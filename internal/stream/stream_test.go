package stream

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestQueueOrderAndClose(t *testing.T) {
	q := New[int]()
	for i := range 1000 {
		if !q.Push(i) {
			t.Fatal("Push on an open queue reported closed")
		}
	}
	errEnd := errors.New("end")
	q.Close(errEnd)
	if q.Push(1000) {
		t.Error("Push after Close reported queued")
	}
	ctx := context.Background()
	for i := range 1000 {
		select {
		case <-q.Ready():
		default:
			t.Fatalf("Ready not closed with %d items queued", 1000-i)
		}
		v, err := q.Next(ctx)
		if err != nil || v != i {
			t.Fatalf("Next = %d, %v; want %d", v, err, i)
		}
	}
	if _, err := q.Next(ctx); !errors.Is(err, errEnd) {
		t.Errorf("Next after draining = %v, want the close error", err)
	}
}

func TestQueueNextWaits(t *testing.T) {
	q := New[string]()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := q.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty queue = %v, want the context's error", err)
	}
	ready := q.Ready()
	got := make(chan string)
	go func() {
		v, _ := q.Next(context.Background())
		got <- v
	}()
	q.Push("x")
	<-ready
	if v := <-got; v != "x" {
		t.Errorf("Next = %q, want x", v)
	}
}
