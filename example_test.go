package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// A Mutex guards work that only one process of a fleet may do at a time.
func ExampleMutex() {
	ctx := context.Background()
	s, err := zkrecipes.NewSession(ctx, []string{"127.0.0.1:2181"}, zkrecipes.WithSessionTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	m := zkrecipes.NewMutex(s, "/app/jobs/nightly-report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	// Stop working as soon as the lock may be gone, and pass the fencing
	// token to the resource the lock guards.
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-m.Lost()
		cancel()
	}()
	fmt.Println("holding with token", m.Token(), work.Err())
}

// TryLock answers at once: nil when the lock was free and is now held,
// ErrLocked when someone else holds or waits for it.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	s, err := zkrecipes.NewSession(ctx, []string{"127.0.0.1:2181"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	m := zkrecipes.NewMutex(s, "/app/jobs/compaction")
	switch err := m.TryLock(ctx); {
	case err == nil:
		defer m.Unlock(ctx)
		fmt.Println("compacting")
	case errors.Is(err, zkrecipes.ErrLocked):
		fmt.Println("another process is compacting")
	default:
		log.Fatal(err)
	}
}

// A Session reports its own end: after expiry nothing obtained through it
// is held any more.
func ExampleSession_Done() {
	ctx := context.Background()
	s, err := zkrecipes.NewSession(ctx, []string{"127.0.0.1:2181"}, zkrecipes.WithStrict())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	go func() {
		<-s.Done()
		log.Printf("session over: %v", s.Err())
	}()
}
