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
				line += fmt.Sprintf(" token:%v node:%v", e.Token > 0, strings.HasPrefix(e.Node, e.Path+"/"))
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
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
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
	step("Lock", "queued mutex; granted mutex token:true node:true", m.Lock(ctx))
	step("Requeue", "released mutex err:<nil>; queued mutex; granted mutex token:true node:true", m.Requeue(ctx))
	step("Unlock", "released mutex err:<nil>", m.Unlock(ctx))

	rw := zkrecipes.NewRWMutex(s, e.path+"/rw")
	step("RLock", "queued read; granted read token:true node:true", rw.RLock(ctx))
	step("RUnlock", "released read err:<nil>", rw.RUnlock(ctx))

	el := zkrecipes.NewElection(s, e.path+"/elect", "me")
	step("Campaign", "queued election; granted election token:true node:true", el.Campaign(ctx))

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
