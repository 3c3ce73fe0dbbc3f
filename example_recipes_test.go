package zkrecipes_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// These examples need a ZooKeeper server (see ensembleSession); they are
// compiled, not run.

func ExampleRWMutex() {
	ctx := context.Background()
	s := ensembleSession(ctx)
	defer s.Close()

	m := zkrecipes.NewRWMutex(s, "/app/config-lock")
	if err := m.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	// Read the configuration; writers wait. Stop when m.Lost() closes.
	if err := m.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}

	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Write it, passing m.Token() to the store so that a writer that lost
	// the lock without knowing cannot overwrite a later one.
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleElection() {
	ctx := context.Background()
	s := ensembleSession(ctx)
	defer s.Close()

	e := zkrecipes.NewElection(s, "/app/leader", "host-a")
	if err := e.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	// Lead until leadership is lost or there is nothing left to do.
	select {
	case <-e.Lost():
		log.Print("leadership lost; stop acting as leader")
	case <-time.After(time.Minute):
		if err := e.Resign(ctx); err != nil {
			log.Fatal(err)
		}
	}
}

func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := ensembleSession(ctx)
	defer s.Close()

	// An observer need not campaign.
	leaders, err := zkrecipes.NewElection(s, "/app/leader", "observer").Observe(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer leaders.Close()
	for {
		leader, err := leaders.Next(ctx)
		if err != nil {
			log.Print(err) // the session is over, or ctx ended
			return
		}
		if leader == "" {
			fmt.Println("no leader")
			continue
		}
		fmt.Println("leader:", leader)
	}
}

func ExampleJoinGroup() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := ensembleSession(ctx)
	defer s.Close()

	g, err := zkrecipes.JoinGroup(ctx, s, "/app/workers", "worker-1", []byte("10.0.0.1:8080"))
	if err != nil {
		log.Fatal(err) // errors.Is(err, zkrecipes.ErrMemberExists) if the id is taken
	}
	defer g.Leave(ctx)
	watch, err := g.Watch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer watch.Close()
	for {
		members, err := watch.Next(ctx)
		if err != nil {
			log.Print(err) // the session is over, or ctx ended
			return
		}
		for _, m := range members {
			fmt.Printf("%s at %s\n", m.ID, m.Data)
		}
	}
}

func ExampleSemaphore() {
	ctx := context.Background()
	s := ensembleSession(ctx)
	defer s.Close()

	// At most 3 processes run an expensive job at once.
	sem := zkrecipes.NewSemaphore(s, "/app/jobs", 3)
	lease, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// Run the job; give up if lease.Lost() closes.
}

func ExampleDoubleBarrier() {
	ctx := context.Background()
	s := ensembleSession(ctx)
	defer s.Close()

	b := zkrecipes.NewDoubleBarrier(s, "/app/batch-42", 5)
	if err := b.Enter(ctx); err != nil { // returns when 5 have entered
		log.Fatal(err)
	}
	// Compute this participant's share.
	if err := b.Leave(ctx); err != nil { // returns when all have left
		log.Fatal(err)
	}
}

func ExampleBarrier() {
	ctx := context.Background()
	s := ensembleSession(ctx)
	defer s.Close()

	gate := zkrecipes.NewBarrier(s, "/app/maintenance")
	// Workers wait while an operator holds the gate closed (Set), and go
	// on once it is removed (Remove).
	if err := gate.Wait(ctx); err != nil {
		log.Fatal(err)
	}
}
