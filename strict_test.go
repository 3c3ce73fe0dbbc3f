package zkrecipes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The overlap found from outside (issue 10): on a slow link, then a stalled
// server, a second process was granted the lock while the strict holder's
// Lost was still open. Strict mode now counts from the send time of the
// newest answered request, checked by a timer, so Lost closes before the
// server can expire the session, whatever the link does.

// strictTrial holds a strict lock through the proxy px, makes the link slow
// by delay each way, then stalls it with stall, and has a second session
// (on second) contend. Lost must close before the second is granted.
func strictTrial(t *testing.T, e *env, px *zktest.Proxy, second []string, delay time.Duration, stall func(), unstall func()) (lostAfter time.Duration) {
	t.Helper()
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	const timeout = 3 * time.Second
	holder := e.sessionOn([]string{px.Addr()}, zkrecipes.WithStrict(), zkrecipes.WithSessionTimeout(timeout))
	m1 := zkrecipes.NewMutex(holder, lock)
	must(t, m1.Lock(ctx), "holder: Lock")
	lost := make(chan time.Time, 1)
	go func() {
		<-m1.Lost()
		lost <- time.Now()
	}()
	px.Delay(delay)
	// Let the slow link carry a few pings before the stall.
	time.Sleep(timeout / 2)
	stalled := time.Now()
	stall()
	other := e.sessionOn(second, zkrecipes.WithSessionTimeout(timeout))
	m2 := zkrecipes.NewMutex(other, lock)
	must(t, m2.Lock(ctx), "second: Lock")
	granted := time.Now()
	var lostAt time.Time
	select {
	case lostAt = <-lost:
	default:
		t.Fatalf("delay %v: the second session was granted the lock %v after the stall while the holder's Lost was open",
			delay, granted.Sub(stalled).Round(time.Millisecond))
	}
	if !lostAt.Before(granted) {
		t.Fatalf("delay %v: Lost closed %v after the second was granted", delay, lostAt.Sub(granted))
	}
	t.Logf("delay %v each way: Lost %v after the stall, second granted %v after it",
		delay, lostAt.Sub(stalled).Round(time.Millisecond), granted.Sub(stalled).Round(time.Millisecond))
	unstall()
	must(t, m2.Unlock(ctx), "second: Unlock")
	holder.Close()
	e.empty(lock)
	return lostAt.Sub(stalled)
}

// TestStrictSlowLinkStalledProxy: the holder's link is delayed, then stalls
// (the proxy holds every byte); the server expires the session and a second
// session, connected directly, gets the lock.
func TestStrictSlowLinkStalledProxy(t *testing.T) {
	for _, delay := range []time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 1100 * time.Millisecond} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) {
			e := newEnv(t)
			px := e.proxy()
			lostAfter := strictTrial(t, e, px, e.servers, delay, px.Pause, px.Cut)
			// A round trip of 0.4 s is well inside the margin (1.5 s,
			// pings every 375 ms): the holding must survive the slow link
			// and end only with the stall.
			if delay == 200*time.Millisecond && lostAfter < 0 {
				t.Errorf("Lost closed %v before the stall, on a link well inside the margin", -lostAfter)
			}
		})
	}
}

// TestStrictSlowLinkStalledMember is the scenario as reported: a 3-member
// ensemble, the holder's link delayed, then its member stalled (SIGSTOP);
// the second contender is connected to another member.
func TestStrictSlowLinkStalledMember(t *testing.T) {
	cluster := startEnsemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The holder's member is a follower, so the ensemble keeps its leader.
	h := -1
	for i := range 3 {
		if mode, err := cluster.Mode(ctx, i); err == nil && mode == "follower" {
			h = i
			break
		}
	}
	if h < 0 {
		t.Fatal("no follower")
	}
	o := (h + 1) % 3
	for _, delay := range []time.Duration{700 * time.Millisecond, 1100 * time.Millisecond} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) {
			e := newEnvOn(t, []string{cluster.Addr(o)})
			px := zktest.NewProxyT(t, cluster.Addr(h))
			strictTrial(t, e, px, []string{cluster.Addr(o)}, delay,
				func() { must(t, cluster.Pause(h), "pause member %d", h) },
				func() { must(t, cluster.Resume(h), "resume member %d", h); px.Pass() })
		})
	}
}
