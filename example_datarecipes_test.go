package zkrecipes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// An increment that loses nothing: read the count with its version, write
// the new value only if the version is unchanged, again if it was not.
func ExampleSharedCount() {
	ctx, s, done := exampleSession()
	defer done()

	c := zkrecipes.NewSharedCount(s, "/app/builds", 0)
	for {
		v, err := c.Count(ctx)
		if err != nil {
			log.Fatal(err)
		}
		ok, err := c.TrySetCount(ctx, v.Value+1, v)
		if err != nil {
			log.Fatal(err) // errors.Is(err, zkrecipes.ErrWriteUnconfirmed): it may have been applied
		}
		if ok {
			fmt.Println("build number", v.Value+1)
			break
		}
	}
	// Output: build number 1
}

// Follow a SharedCount's value as it changes.
func ExampleSharedCount_Watch() {
	ctx, s, done := exampleSession()
	defer done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	c := zkrecipes.NewSharedCount(s, "/app/replicas", 3)
	values, err := c.Watch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer values.Close()
	v, err := values.Next(ctx) // the count when the watch was set
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Value)
	if err := c.SetCount(ctx, 5); err != nil {
		log.Fatal(err)
	}
	if v, err = values.Next(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Value)
	// Output:
	// 3
	// 5
}

// Add retries its read and conditional write until one is applied; with
// WithPromotion, a change that keeps colliding queues on a lock instead.
func ExampleAtomicLong() {
	ctx, s, done := exampleSession()
	defer done()

	hits := zkrecipes.NewAtomicLong(s, "/app/hits", zkrecipes.WithPromotion("/app/hits-lock", 10))
	for range 3 {
		if _, err := hits.Add(ctx, 1); err != nil {
			log.Fatal(err)
		}
	}
	n, err := hits.Get(ctx)
	fmt.Println(n, err)
	// Output: 3 <nil>
}

// A work queue: each item goes to exactly one consumer, lost if that
// consumer dies before it is done with it.
func ExampleQueue() {
	ctx, s, done := exampleSession()
	defer done()

	q := zkrecipes.NewQueue(s, "/app/jobs")
	for _, job := range []string{"resize a.png", "resize b.png"} {
		if err := q.Offer(ctx, []byte(job)); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		job, err := q.Take(ctx) // waits for an item
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(job))
	}
	_, ok, err := q.Poll(ctx)
	fmt.Println(ok, err)
	// Output:
	// resize a.png
	// resize b.png
	// false <nil>
}

// A LockingQueue keeps an item until its consumer consumes it: a consumer
// that dies before then gives it back to the others.
func ExampleLockingQueue() {
	ctx, s, done := exampleSession()
	defer done()

	q := zkrecipes.NewLockingQueue(s, "/app/mail")
	if err := q.Offer(ctx, []byte("welcome mail to ann")); err != nil {
		log.Fatal(err)
	}
	it, err := q.Take(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sending", string(it.Data()))
	select {
	case <-it.Lost():
		log.Print("lock lost: another consumer may send it too")
	default:
		if err := it.Consume(ctx); err != nil {
			log.Fatal(err)
		}
	}
	n, err := q.Len(ctx)
	fmt.Println(n, err)
	// Output:
	// sending welcome mail to ann
	// 0 <nil>
}

// Register an instance where Curator's ServiceDiscovery finds it, and look
// the service up.
func ExampleDiscovery() {
	ctx, s, done := exampleSession()
	defer done()

	d := zkrecipes.NewDiscovery(s, "/services")
	r, err := d.Register(ctx, zkrecipes.ServiceInstance{
		Name: "api", ID: "api-1", Address: "10.0.0.7", Port: 8080,
		Payload: json.RawMessage(`{"zone":"eu-1"}`),
		URISpec: "{scheme}://{address}:{port}",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Unregister(ctx)

	insts, err := d.Instances(ctx, "api")
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range insts {
		fmt.Println(in.ID, in.URI(nil), string(in.Payload))
	}
	// Output: api-1 http://10.0.0.7:8080 {"zone":"eu-1"}
}

// Stay registered across session expiry: KeepRegistered opens a new session
// whenever the old one ends, until its context does.
func ExampleKeepRegistered() {
	servers, stopServer := exampleServer()
	defer stopServer()
	ctx, stop := context.WithTimeout(context.Background(), 200*time.Millisecond) // until shutdown, say
	defer stop()

	connect := func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, servers)
	}
	inst := zkrecipes.ServiceInstance{Name: "api", ID: "api-1", Port: 8080}
	err := zkrecipes.KeepRegistered(ctx, connect, "/services", inst)
	fmt.Println(err, errors.Is(ctx.Err(), context.DeadlineExceeded))
	// Output: <nil> true
}
