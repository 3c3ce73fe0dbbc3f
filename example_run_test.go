package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// A MultiLock takes several locks all or none, always in the same order,
// so two transfers between the same accounts cannot deadlock.
func ExampleMultiLock() {
	ctx, s, done := exampleSession()
	defer done()

	m := zkrecipes.NewMultiLock(s, []string{"/accounts/bob", "/accounts/alice"})
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err) // nothing is held
	}
	fmt.Println("holding", m.Paths())
	// Move the money, giving each account's store its token,
	// m.Token("/accounts/alice"), and stop if m.Lost() closes.
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: holding [/accounts/alice /accounts/bob]
}

// A PersistentNode stays: deleted by someone else, it is made again; with
// WithSessionRenewal, also on a new session after its session expired.
func ExampleCreatePersistentNode() {
	servers, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, servers)
	}
	s, err := connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	n, err := zkrecipes.CreatePersistentNode(ctx, s, "/services/api/host-a", []byte("10.0.0.1:8080"), zkclient.Ephemeral,
		zkrecipes.WithSessionRenewal(connect))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close(ctx)

	// An operator deletes it; it comes back.
	c := s.Client()
	if err := c.Delete(ctx, n.Path(), -1); err != nil {
		log.Fatal(err)
	}
	for {
		_, ok, w, err := c.ExistsW(ctx, n.Path())
		if err != nil {
			log.Fatal(err)
		}
		if ok {
			w.Remove(ctx)
			break
		}
		<-w.Event()
	}
	data, _, err := c.Get(ctx, n.Path())
	fmt.Println(string(data), err)
	// Output: 10.0.0.1:8080 <nil>
}

// TryAcquire takes a permit only if one is free now.
func ExampleSemaphore_TryAcquire() {
	ctx, s, done := exampleSession()
	defer done()

	// One render at a time; the lease node says who renders.
	sem := zkrecipes.NewSemaphore(s, "/jobs/render", 1, zkrecipes.WithNodeData([]byte("host-a")))
	lease, err := sem.TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	_, err = zkrecipes.NewSemaphore(s, "/jobs/render", 1).TryAcquire(ctx)
	fmt.Println(errors.Is(err, zkrecipes.ErrLocked))
	// Output: true
}

// A leader advertises a value, such as its address, and changes it while
// leading; observers see each value.
func ExampleElection_Proclaim() {
	ctx, s, done := exampleSession()
	defer done()

	e := zkrecipes.NewElection(s, "/app/leader", "host-a")
	if err := e.CampaignValue(ctx, "10.0.0.1:8080"); err != nil {
		log.Fatal(err)
	}
	observer := zkrecipes.NewElection(s, "/app/leader", "observer")
	fmt.Println(observer.Leader(ctx))
	if err := e.Proclaim(ctx, "10.0.0.1:9090"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(observer.Leader(ctx))
	// Output:
	// 10.0.0.1:8080 <nil>
	// 10.0.0.1:9090 <nil>
}
