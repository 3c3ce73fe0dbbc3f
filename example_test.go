package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// The examples' set-up, so that each one shows only the API it is about.

// exampleServer starts an embedded server for a runnable example; stop
// closes it. A program uses its ensemble's addresses instead.
func exampleServer() (servers []string, stop func()) {
	srv, err := zkserver.Run()
	if err != nil {
		log.Fatal(err)
	}
	return []string{srv.Addr()}, func() { srv.Close() }
}

// exampleSession starts an embedded server and opens a session on it, for
// a runnable example, with a context that ends after 10s; done closes the
// session, ends the context and closes the server.
func exampleSession() (ctx context.Context, s *zkrecipes.Session, done func()) {
	servers, stop := exampleServer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s, err := zkrecipes.NewSession(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	return ctx, s, func() { s.Close(); cancel(); stop() }
}

// ensembleSession opens a session on a ZooKeeper server on localhost:2181,
// for the examples that are compiled, not run (they wait on other
// processes).
func ensembleSession(ctx context.Context, opts ...zkrecipes.SessionOption) *zkrecipes.Session {
	s, err := zkrecipes.NewSession(ctx, []string{"localhost:2181"}, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// A Mutex guards work that only one process of a fleet may do at a time.
func ExampleMutex() {
	ctx := context.Background()
	s, err := zkrecipes.NewSession(ctx, []string{"127.0.0.1:2181"}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(10*time.Second)))
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
	s := ensembleSession(ctx)
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
	s := ensembleSession(ctx, zkrecipes.WithStrict())
	defer s.Close()
	go func() {
		<-s.Done()
		log.Printf("session over: %v", s.Err())
	}()
}
