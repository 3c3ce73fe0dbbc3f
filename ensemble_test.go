package zkrecipes_test

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestMutexEnsembleFailover kills the member the lock holder is connected to
// while 10 sessions contend: the lock stays exclusive and work continues.
func TestMutexEnsembleFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member ensemble")
	}
	if sharedErr != nil {
		zktest.SkipOrFail(t, sharedErr)
	}
	cluster := zktest.StartT(t, zktest.Options{Servers: 3})
	e := newEnvOn(t, cluster.Addrs())
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, 3*time.Minute)

	var (
		inside atomic.Int32
		total  atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		// The test kills the member while a holder is inside: the next
		// holder (after 50 acquisitions) hands over the server it is
		// connected to and stays inside until the member is dead.
		handover = make(chan string, 1)
		killed   = make(chan struct{})
		claim    sync.Once
	)
	for i := range 10 {
		s := e.session(zkrecipes.WithSessionTimeout(8 * time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := zkrecipes.NewMutex(s, lock)
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := m.Lock(ctx)
				if errors.Is(err, zkrecipes.ErrConnectionLoss) {
					continue
				}
				if err != nil {
					t.Errorf("session %d: Lock: %v", i, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("session %d holds with %d others", i, n-1)
				}
				if total.Load() >= 50 {
					claim.Do(func() {
						handover <- s.Server()
						<-killed
					})
				}
				time.Sleep(2 * time.Millisecond)
				select {
				case <-m.Lost():
					t.Errorf("session %d: lock lost during failover (session %v)", i, s.Err())
				default:
				}
				inside.Add(-1)
				total.Add(1)
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("session %d: Unlock: %v", i, err)
					return
				}
			}
		}()
	}
	var at string
	select {
	case at = <-handover:
	case <-ctx.Done():
		t.Fatal("no holder after 50 acquisitions")
	}
	victim := slices.Index(cluster.Addrs(), at)
	if victim < 0 {
		t.Fatalf("holder's server %q is not a member of %v", at, cluster.Addrs())
	}
	before := total.Load()
	must(t, cluster.Kill(victim), "kill member %d", victim)
	close(killed)
	t.Logf("killed member %d (%s), the current holder's, after %d acquisitions", victim, at, before)
	e.waitFor("work to continue after the kill", func() bool { return total.Load() >= before+100 })
	close(stop)
	wg.Wait()
	t.Logf("%d acquisitions in all", total.Load())
	e.empty(lock)
}
