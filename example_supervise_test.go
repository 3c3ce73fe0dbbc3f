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

// RunWhileLeader keeps a service in the election for as long as it runs:
// the work runs while this process leads, its context is cancelled at the
// first sign of loss, and after a session expiry the supervisor builds a
// new session and campaigns again. Here the work stops the service once
// it has led.
func ExampleRunWhileLeader() {
	servers, stopServer := exampleServer()
	defer stopServer()
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	connect := func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, servers, zkrecipes.WithStrict(),
			zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(10*time.Second)))
	}
	err := zkrecipes.RunWhileLeader(ctx, connect, "/services/scheduler/leader", "host-a", func(ctx context.Context) error {
		fmt.Println("leading")
		// Schedule jobs until ctx is cancelled, giving each write the
		// leadership's fencing token. Here: stop the service.
		stop()
		<-ctx.Done()
		fmt.Println("work cancelled")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resigned; supervisor returned")
	// Output:
	// leading
	// work cancelled
	// resigned; supervisor returned
}

// RunWhileLocked runs work only while this process holds the lock; with
// WithRetry(false), the first error of the work ends it.
func ExampleRunWhileLocked() {
	servers, stopServer := exampleServer()
	defer stopServer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(ctx context.Context) (*zkrecipes.Session, error) { return zkrecipes.NewSession(ctx, servers) }
	err := zkrecipes.RunWhileLocked(ctx, connect, "/jobs/compaction", func(ctx context.Context) error {
		return errors.New("compaction: disk full")
	}, zkrecipes.WithRetry(func(error) bool { return false }))
	fmt.Println(err)
	// Output: compaction: disk full
}

// RunAsMember keeps this process in a group (a worker pool, say) and runs
// its work while it is a member; by default the work returning nil ends it.
func ExampleRunAsMember() {
	servers, stopServer := exampleServer()
	defer stopServer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(ctx context.Context) (*zkrecipes.Session, error) { return zkrecipes.NewSession(ctx, servers) }
	err := zkrecipes.RunAsMember(ctx, connect, "/pools/workers", "worker-1", []byte("10.0.0.7:9000"), func(ctx context.Context) error {
		fmt.Println("member: taking work")
		return nil
	})
	fmt.Println("left the pool:", err)
	// Output:
	// member: taking work
	// left the pool: <nil>
}
