package zkrecipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// On a dead link, Unlock gives up after the session timeout (not a fixed
// time) and says the release is unconfirmed, not that the caller's context
// expired; Close returns within its bound and says it was not confirmed.
func TestUnlockAndCloseBoundedOnDeadLink(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	p := e.proxy()
	const timeout = 2 * time.Second
	s := e.sessionOn([]string{p.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(timeout)))
	m := zkrecipes.NewMutex(s, lock)
	must(t, m.Lock(ctx), "Lock")
	p.Blackhole()
	t0 := time.Now()
	err := m.Unlock(ctx)
	took := time.Since(t0)
	if !errors.Is(err, zkrecipes.ErrReleaseUnconfirmed) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Unlock on a dead link = %v, want ErrReleaseUnconfirmed (and not DeadlineExceeded)", err)
	}
	if took < s.Timeout()*9/10 || took > s.Timeout()+3*time.Second {
		t.Errorf("Unlock gave up after %v; the session timeout is %v", took, s.Timeout())
	}
	t0 = time.Now()
	err = s.Close()
	if !errors.Is(err, zkclient.ErrCloseUnconfirmed) {
		t.Errorf("Close on a dead link = %v, want ErrCloseUnconfirmed", err)
	}
	if took := time.Since(t0); took > 4*time.Second {
		t.Errorf("Close took %v on a dead link", took)
	}
	// The server expires the session: the node goes.
	e.waitFor("the session's node to go", func() bool { return len(e.children(lock)) == 0 })
}

// Close voids holdings before its request leaves: over a slow link the
// server ends the session (and another session is granted the lock) before
// the answer is back, and the holder must have been told by then. Found by
// the nemesis suite's long run (seed 8564367160994920).
func TestCloseVoidsHoldingsFirst(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(4*time.Second)))
	m := zkrecipes.NewMutex(s, lock)
	must(t, m.Lock(ctx), "Lock")
	other := zkrecipes.NewMutex(e.session(), lock)
	p.Delay(500 * time.Millisecond)
	go s.Close()
	must(t, other.Lock(ctx), "other: Lock after the close reached the server")
	select {
	case <-m.Lost():
	default:
		t.Fatal("another session holds the lock while the closing holder's Lost is open")
	}
	must(t, other.Unlock(ctx), "other: Unlock")
}
