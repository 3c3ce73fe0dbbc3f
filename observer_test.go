package zkrecipes_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// holdLog records what a recipe Observer is told, one line per event:
// "granted mutex /path token>0" and so on.
type holdLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *holdLog) observer() *zkrecipes.Observer {
	add := func(what string) func(zkrecipes.HoldEvent) {
		return func(e zkrecipes.HoldEvent) {
			line := fmt.Sprintf("%s %s", what, e.Recipe)
			switch what {
			case "granted":
				line += fmt.Sprintf(" token:%v node:%v ahead:%d ctx:%v", e.Token > 0, strings.HasPrefix(e.Node, e.Path+"/"),
					e.Ahead, e.Context != nil && e.Context.Value(callerKey{}) == "caller")
			case "released":
				line += fmt.Sprintf(" err:%v", e.Err)
			case "lost":
				line += " " + string(e.Reason)
			}
			l.mu.Lock()
			l.lines = append(l.lines, line)
			l.mu.Unlock()
		}
	}
	return &zkrecipes.Observer{Queued: add("queued"), Granted: add("granted"), Abandoned: add("abandoned"),
		Released: add("released"), Lost: add("lost")}
}

// callerKey marks the context of the calls TestObserverLife makes, which
// the events must carry.
type callerKey struct{}

func (l *holdLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "; ")
	l.lines = nil
	return s
}

// TestObserverLife follows contenders of each recipe kind through the
// Observer: one end for each grant, a Requeue as a release and a new
// queue, and a session's close as the loss of what it still held.
func TestObserverLife(t *testing.T) {
	e := newEnv(t)
	var l holdLog
	s := e.session(zkrecipes.WithObserver(l.observer()))
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "caller"), zktest.Bound(30*time.Second))
	defer cancel()
	step := func(what, want string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := l.take(); got != want {
			t.Errorf("%s told:\n%s\nwant:\n%s", what, got, want)
		}
	}

	m := zkrecipes.NewMutex(s, e.path+"/lock")
	step("Lock", "queued mutex; granted mutex token:true node:true ahead:0 ctx:true", m.Lock(ctx))
	step("Requeue", "released mutex err:<nil>; queued mutex; granted mutex token:true node:true ahead:0 ctx:true", m.Requeue(ctx))

	// A second contender queues behind the holder: one ahead of it.
	m2 := zkrecipes.NewMutex(s, e.path+"/lock")
	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	zktest.Eventually(t, 10*time.Second, "the second contender's node", func() error {
		n, _, err := s.Client().Children(ctx, e.path+"/lock")
		if err == nil && len(n) < 2 {
			err = fmt.Errorf("%d contenders, want 2", len(n))
		}
		return err
	})
	step("Lock behind", "queued mutex", nil)
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	step("Unlock, then the waiter", "released mutex err:<nil>; granted mutex token:true node:true ahead:1 ctx:true", <-locked)
	step("Unlock", "released mutex err:<nil>", m2.Unlock(ctx))

	rw := zkrecipes.NewRWMutex(s, e.path+"/rw")
	step("RLock", "queued read; granted read token:true node:true ahead:0 ctx:true", rw.RLock(ctx))
	step("RUnlock", "released read err:<nil>", rw.RUnlock(ctx))

	el := zkrecipes.NewElection(s, e.path+"/elect", "me")
	step("Campaign", "queued election; granted election token:true node:true ahead:0 ctx:true", el.Campaign(ctx))

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.take(); got != "lost election closed" {
		t.Errorf("Close told %q, want the election lost (closed)", got)
	}
	el.Resign(ctx)
	if got := l.take(); got != "" {
		t.Errorf("Resign after the loss told %q, want nothing", got)
	}
}
