package gozk_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// go-zookeeper/zk as a client of zkserver: its operations and watches
// (moved here from zkserver's tests, so that the library module does not
// require go-zookeeper/zk), and its four-letter-word parser on both
// servers.

var openACL = zk.WorldACL(zk.PermAll)

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

func TestGoClientOperations(t *testing.T) {
	s := zkserver.RunT(t)
	c, _ := zkConnect(t, s.Addr())
	if _, err := c.Create("/a", []byte("1"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/a", nil, 0, openACL); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create twice: %v", err)
	}
	data, st, err := c.Get("/a")
	if err != nil || string(data) != "1" || st.Version != 0 || st.DataLength != 1 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	if _, err := c.Set("/a", []byte("2"), 5); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("set bad version: %v", err)
	}
	st, err = c.Set("/a", []byte("22"), 0)
	if err != nil || st.Version != 1 || st.DataLength != 2 || st.Mzxid <= st.Czxid {
		t.Fatalf("set: %+v %v", st, err)
	}
	ok, _, err := c.Exists("/a")
	if !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if _, err := c.Create("/a/b", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	kids, st, err := c.Children("/a")
	if err != nil || len(kids) != 1 || kids[0] != "b" || st.NumChildren != 1 || st.Cversion != 1 {
		t.Fatalf("children: %v %+v %v", kids, st, err)
	}
	if err := c.Delete("/a", -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	if _, err := c.Sync("/a"); err != nil {
		t.Fatal(err)
	}
	acl, _, err := c.GetACL("/a")
	if err != nil || len(acl) != 1 || acl[0].Scheme != "world" {
		t.Fatalf("getACL: %v %v", acl, err)
	}
	if _, err := c.SetACL("/a", zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/a", nil, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("set without write permission: %v", err)
	}
	res, err := c.Multi(&zk.CheckVersionRequest{Path: "/a", Version: 1},
		&zk.DeleteRequest{Path: "/a/b", Version: -1},
		&zk.CreateRequest{Path: "/c", Acl: openACL})
	if err != nil || len(res) != 3 || res[2].String != "/c" {
		t.Fatalf("multi: %+v %v", res, err)
	}
	_, err = c.Multi(&zk.CreateRequest{Path: "/d", Acl: openACL}, &zk.DeleteRequest{Path: "/nope", Version: -1})
	if !errors.Is(err, zk.ErrNoNode) || s.Exists("/d") {
		t.Fatalf("failed multi: %v, /d exists: %v", err, s.Exists("/d"))
	}
	if err := c.AddAuth("digest", []byte("bob:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/bob", nil, 0, zk.DigestACL(zk.PermAll, "bob", "pw")); err != nil {
		t.Fatal(err)
	}
	other, _ := zkConnect(t, s.Addr())
	if _, _, err := other.Get("/bob"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("get without auth: %v", err)
	}
	if _, err := c.CreateContainer("/box", nil, 4, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTTL("/ttl", nil, zk.FlagTTL, openACL, time.Second); err == nil {
		t.Fatalf("TTL while disabled: %v", err)
	}
	st2 := s.Stats()
	if st2.Requests[jute.OpCreate] < 3 || st2.Sessions != 2 {
		t.Fatalf("stats: %+v", st2)
	}
}

func TestGoClientWatches(t *testing.T) {
	s := zkserver.RunT(t)
	c, _ := zkConnect(t, s.Addr())
	_, _, wExist, _ := c.ExistsW("/w")
	_, _, wRoot, _ := c.ChildrenW("/")
	s.Create("/w", []byte("x"))
	if ev := recvEvent(t, wExist); ev.Type != zk.EventNodeCreated || ev.Path != "/w" {
		t.Fatalf("exists watch: %+v", ev)
	}
	if ev := recvEvent(t, wRoot); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/" {
		t.Fatalf("child watch: %+v", ev)
	}
	_, _, wData, _ := c.GetW("/w")
	s.Set("/w", []byte("y"))
	if ev := recvEvent(t, wData); ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("data watch: %+v", ev)
	}
	_, _, wData, _ = c.GetW("/w")
	s.Delete("/w")
	if ev := recvEvent(t, wData); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("delete watch: %+v", ev)
	}
	if n := s.Stats().WatchEvents; n != 4 {
		t.Fatalf("watch events sent: %d", n)
	}
}

// TestFLWSrvrOnZkserver: go-zookeeper v1.0.4's FLWSrvr wants the version
// line of ZooKeeper 3.4 to 3.6 ("built on 02/25/2022 08:49 GMT") and
// cannot parse 3.8's; on zkserver it fails as it does on real ZooKeeper.
func TestFLWSrvrOnZkserver(t *testing.T) {
	t.Setenv("ZKTEST_SERVER", "zookeeper")
	real := zktest.StartT(t, zktest.Options{})
	emb := zkserver.RunT(t)
	var got [2]string
	for i, addr := range []string{real.Addr(0), emb.Addr()} {
		stats, ok := zk.FLWSrvr([]string{addr}, 5*time.Second)
		got[i] = fmt.Sprintf("ok=%v err=%v", ok, stats[0].Error)
	}
	if got[0] != got[1] {
		t.Errorf("FLWSrvr on ZooKeeper: %s; on zkserver: %s", got[0], got[1])
	}
}
