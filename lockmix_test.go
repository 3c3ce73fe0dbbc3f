package zkrecipes_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// A Mutex and an RWMutex on one path exclude each other: the Mutex's node
// counts as a writer.
func TestMutexAndRWMutexSharePath(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	s := e.session()
	m := zkrecipes.NewMutex(s, lock)
	rw := zkrecipes.NewRWMutex(e.session(), lock)

	must(t, m.Lock(ctx), "Mutex.Lock")
	if err := rw.TryRLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("TryRLock while a Mutex holds = %v, want ErrLocked", err)
	}
	if err := rw.TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("RWMutex.TryLock while a Mutex holds = %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() { got <- rw.RLock(ctx) }()
	e.waitFor("the reader to queue", func() bool { return len(e.children(lock)) == 2 })
	select {
	case err := <-got:
		t.Fatalf("reader got in beside the Mutex holder (err=%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	must(t, m.Unlock(ctx), "Mutex.Unlock")
	must(t, <-got, "RLock after the Mutex released")
	if err := m.TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("Mutex.TryLock while a reader holds = %v, want ErrLocked", err)
	}
	must(t, rw.RUnlock(ctx), "RUnlock")
	e.empty(lock)
}

func TestTryRLockAmongReaders(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	a, b := zkrecipes.NewRWMutex(e.session(), lock), zkrecipes.NewRWMutex(e.session(), lock)
	must(t, a.RLock(ctx), "a: RLock")
	must(t, b.TryRLock(ctx), "b: TryRLock beside a reader")
	if err := zkrecipes.NewRWMutex(e.session(), lock).TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("TryLock while readers hold = %v, want ErrLocked", err)
	}
	must(t, a.RUnlock(ctx), "a: RUnlock")
	must(t, b.RUnlock(ctx), "b: RUnlock")
	e.empty(lock)
}

// WithNodeData puts the caller's bytes in the contender's node.
func TestLockNodeData(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	m := zkrecipes.NewMutex(e.session(), lock, zkrecipes.WithNodeData([]byte("worker-7")))
	must(t, m.Lock(ctx), "Lock")
	kids := e.children(lock)
	if len(kids) != 1 {
		t.Fatalf("nodes %v, want one", kids)
	}
	data, _, err := e.admin.Get(lock + "/" + kids[0])
	must(t, err, "get")
	if string(data) != "worker-7" {
		t.Errorf("node data %q, want %q", data, "worker-7")
	}
	must(t, m.Unlock(ctx), "Unlock")
	e.empty(lock)
}
