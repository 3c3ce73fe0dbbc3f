package zkserver_test

import (
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// zkConnect connects go-zookeeper/zk to addr and records its session
// events.
func zkConnect(t *testing.T, addr string) (*zk.Conn, *stateLog) {
	t.Helper()
	log := &stateLog{}
	c, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false),
		zk.WithLogger(quiet{}), zk.WithEventCallback(log.add))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if !log.wait(zk.StateHasSession, 10*time.Second) {
		t.Fatal("no session")
	}
	return c, log
}

// quiet drops go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// stateLog records the session states go-zookeeper reports.
type stateLog struct {
	mu     sync.Mutex
	states []zk.State
}

func (l *stateLog) add(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	l.mu.Lock()
	l.states = append(l.states, ev.State)
	l.mu.Unlock()
}

// wait waits until state s has been reported after the last wait.
func (l *stateLog) wait(s zk.State, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for i, x := range l.states {
			if x == s {
				l.states = l.states[i+1:]
				l.mu.Unlock()
				return true
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func recvEvent(t *testing.T, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
		return zk.Event{}
	}
}

// TestConformanceReconnectCatchUp cuts a client's connection (through
// zktest.Proxy) while its watched nodes change, and checks which events
// the server delivers once the client reconnects with SetWatches.
func TestConformanceReconnectCatchUp(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		admin, _ := zkConnect(t, tg.addr)
		proxy, err := zktest.NewProxy(tg.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		c, states := zkConnect(t, proxy.Addr())
		p := tg.path
		acl := zk.WorldACL(zk.PermAll)
		for _, n := range []string{p, p + "/a", p + "/b", p + "/same"} {
			if _, err := admin.Create(n, nil, 0, acl); err != nil {
				t.Fatal(err)
			}
		}
		_, _, wa, _ := c.GetW(p + "/a")
		_, _, wb, _ := c.GetW(p + "/b")
		_, _, wnew, _ := c.ExistsW(p + "/new")
		_, _, wkids, _ := c.ChildrenW(p)
		_, _, wsame, _ := c.GetW(p + "/same")

		proxy.Refuse(true)
		proxy.Cut()
		if !states.wait(zk.StateDisconnected, 10*time.Second) {
			t.Fatal("not disconnected")
		}
		admin.Set(p+"/a", []byte("x"), -1)
		admin.Delete(p+"/b", -1)
		admin.Create(p+"/new", nil, 0, acl)
		proxy.Refuse(false)
		if !states.wait(zk.StateHasSession, 10*time.Second) {
			t.Fatal("no reconnect")
		}
		for _, w := range []struct {
			name string
			ch   <-chan zk.Event
		}{{"a", wa}, {"b", wb}, {"new", wnew}, {"kids", wkids}} {
			ev := recvEvent(t, w.ch)
			r.logf("%s: %v %s", w.name, ev.Type, ev.Path)
		}
		// The unchanged node's watch was re-registered and still fires.
		admin.Set(p+"/same", []byte("y"), -1)
		ev := recvEvent(t, wsame)
		r.logf("same: %v %s", ev.Type, ev.Path)
	})
}

// TestConformanceEphemeralOnClose closes a go-zookeeper session that
// holds an ephemeral sequential node and records what a watcher sees.
func TestConformanceEphemeralOnClose(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		admin, _ := zkConnect(t, tg.addr)
		c, _ := zkConnect(t, tg.addr)
		p := tg.path
		acl := zk.WorldACL(zk.PermAll)
		admin.Create(p, nil, 0, acl)
		name, err := c.Create(p+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		r.logf("created %s %v", name, err)
		ok, st, w, err := admin.ExistsW(name)
		r.logf("exists %v owner==session:%v %v", ok, st.EphemeralOwner == c.SessionID(), err)
		c.Close()
		ev := recvEvent(t, w)
		r.logf("event %v %s", ev.Type, ev.Path)
		kids, _, _ := admin.Children(p)
		r.logf("children %v", kids)
	})
}
