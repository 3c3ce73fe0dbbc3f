package faulttest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest/faulttest"
)

// worker is one pass of the work under test: take the Mutex of "orders",
// write a few batches while it is held, release it. Every write carries
// the lock's fencing token to a store that enforces it (here the run's
// fenced register; in production, see package fencing), and the worker
// stops as soon as the lock's Lost channel closes.
func worker(ctx context.Context, c *faulttest.Client) (err error) {
	s, err := c.Session(ctx) // a new one after an expiry
	if err != nil {
		return err
	}
	m := zkrecipes.NewMutex(s, c.Path("orders"))
	if err := m.Lock(ctx); err != nil {
		return err // a fault's error: recorded, and worker is called again
	}
	c.Acquired("orders", m.Token(), m.Lost())
	defer func() {
		c.Released("orders") // before the release: the holding ends here
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, m.Unlock(uctx))
	}()
	for batch := range 5 {
		select {
		case <-m.Lost():
			c.Lost("orders") // stop using it now
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond): // the batch's work
		}
		if !c.WriteFenced("orders", m.Token()) {
			return nil // a successor wrote: this holder is stale
		}
		c.Op("batch", strconv.Itoa(batch))
	}
	return nil
}

// Run a worker on four sessions of a real 3-member ZooKeeper ensemble
// while the schedule kills, stalls and cuts things, then check the
// history. In a _test.go file of your own:
//
//	func TestWorkerUnderFaults(t *testing.T) {
//		faulttest.Run(t, faulttest.Config{}, worker)
//	}
//
// A failure prints the seed, how to replay it (go test -run
// '^TestWorkerUnderFaults$' -faulttest.seed=N) and the timeline around
// each violation. (Not run here: it needs Java, ZooKeeper and a minute.)
func ExampleRun() {
	testWorkerUnderFaults := func(t *testing.T) {
		faulttest.Run(t, faulttest.Config{}, worker)
	}
	_ = testWorkerUnderFaults
}
