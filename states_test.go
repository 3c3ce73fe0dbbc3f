package zkrecipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nextState reads one state change, failing the test after a while.
func nextState(t *testing.T, st *zkrecipes.SessionStates, want zkrecipes.SessionState) zkrecipes.SessionEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	ev, err := st.Next(ctx)
	if err != nil {
		t.Fatalf("waiting for %v: %v", want, err)
	}
	if ev.State != want {
		t.Fatalf("state %v (%v), want %v", ev.State, ev.Err, want)
	}
	return ev
}

// A cut connection is Suspended then Reconnected, with the holdings
// intact; Close is Lost then Closed, and the stream ends.
func TestSessionStatesCutAndClose(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()})
	st := s.States()
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	must(t, m.Lock(ctx), "Lock")
	p.Cut()
	nextState(t, st, zkrecipes.SessionSuspended)
	if ev := nextState(t, st, zkrecipes.SessionReconnected); ev.Server == "" {
		t.Error("Reconnected names no server")
	}
	select {
	case <-m.Lost():
		t.Fatal("Lost closed by a reconnection within the session timeout")
	default:
	}
	s.Close()
	nextState(t, st, zkrecipes.SessionLost)
	if ev := nextState(t, st, zkrecipes.SessionClosed); !errors.Is(ev.Err, zkrecipes.ErrSessionClosed) {
		t.Errorf("Closed event's error %v, want ErrSessionClosed", ev.Err)
	}
	if _, err := st.Next(ctx); !errors.Is(err, zkrecipes.ErrSessionClosed) {
		t.Errorf("Next after the final state = %v, want ErrSessionClosed", err)
	}
	// A stream asked for after the end reports the final state.
	late := s.States()
	nextState(t, late, zkrecipes.SessionClosed)
}

// Expiry is Lost then Expired; Close ends a stream early.
func TestSessionStatesExpiry(t *testing.T) {
	e := newEnv(t)
	s := e.session()
	st := s.States()
	stopped := s.States()
	stopped.Close()
	e.expire(s)
	// The server closes the connection first; the client learns of the
	// expiry when it connects again.
	if ev := nextState(t, st, zkrecipes.SessionSuspended); ev.Err == nil {
		t.Error("Suspended gives no reason")
	}
	nextState(t, st, zkrecipes.SessionLost)
	if ev := nextState(t, st, zkrecipes.SessionExpired); !errors.Is(ev.Err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Expired event's error %v, want ErrSessionExpired", ev.Err)
	}
	if _, err := stopped.Next(context.Background()); !errors.Is(err, zkrecipes.ErrStreamClosed) {
		t.Errorf("Next on a closed stream = %v, want ErrStreamClosed", err)
	}
}

// In strict mode a link silent past the margin is Lost before the
// connection is even given up, and Lost() of the holding is closed; the
// link back is Reconnected, and a new holding can be taken.
func TestSessionStatesStrictLost(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()}, zkrecipes.WithStrict(), zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(4*time.Second)))
	st := s.States()
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	must(t, m.Lock(ctx), "Lock")
	p.Blackhole()
	nextState(t, st, zkrecipes.SessionLost)
	closed(t, m.Lost(), "Lost after the strict margin")
	p.Pass()
	p.Cut() // the blackholed connection's bytes are gone; start afresh
	for {
		ev, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for Reconnected: %v", err)
		}
		if ev.State == zkrecipes.SessionReconnected {
			break
		}
		if ev.State != zkrecipes.SessionSuspended {
			t.Fatalf("state %v while reconnecting, want Suspended or Reconnected", ev.State)
		}
	}
	must(t, m.Unlock(ctx), "Unlock of the lost holding")
	must(t, m.Lock(ctx), "Lock after reconnecting")
	must(t, m.Unlock(ctx), "Unlock")
	e.empty(e.path + "/lock")
}
