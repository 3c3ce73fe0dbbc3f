package zkserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

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

func TestExpireSession(t *testing.T) {
	s := zkserver.RunT(t)
	c, states := zkConnect(t, s.Addr())
	watcher, _ := zkConnect(t, s.Addr())
	if _, err := c.Create("/e", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, w, _ := watcher.ExistsW("/e")
	if err := s.ExpireSession(c.SessionID()); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, w); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("event %+v", ev)
	}
	if !states.wait(zk.StateExpired, 10*time.Second) {
		t.Fatal("client did not see its session expire")
	}
	if err := s.ExpireSession(12345); !errors.Is(err, zkserver.ErrNoSession) {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestSessionTimesOut(t *testing.T) {
	s := zkserver.RunT(t)
	raw, resp, err := dialRawTimeout(t, s.Addr(), 200)
	if err != nil || resp.TimeOut != 200 {
		t.Fatalf("connect: %+v %v", resp, err)
	}
	raw.call(create("/eph", "", 1))
	start := time.Now()
	for s.Exists("/eph") {
		if time.Since(start) > 3*time.Second {
			t.Fatal("session did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("expired after %v, before its timeout", d)
	}
	if _, err := raw.readFrame(); err == nil {
		t.Fatal("connection of the expired session still open")
	}
}

func TestRestartKeepsTreeAndSessions(t *testing.T) {
	s := zkserver.RunT(t)
	c, states := zkConnect(t, s.Addr())
	if _, err := c.Create("/keep", []byte("v"), zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	id, zxid := c.SessionID(), s.Zxid()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if !states.wait(zk.StateHasSession, 10*time.Second) {
		t.Fatal("no reconnect")
	}
	if c.SessionID() != id || s.Zxid() != zxid {
		t.Fatalf("session %x→%x zxid %d→%d", id, c.SessionID(), zxid, s.Zxid())
	}
	data, _, err := c.Get("/keep")
	if err != nil || string(data) != "v" {
		t.Fatalf("after restart: %q %v", data, err)
	}
}

func TestDropConnectionsKeepsWatches(t *testing.T) {
	s := zkserver.RunT(t)
	c, states := zkConnect(t, s.Addr())
	s.Create("/x", nil)
	_, _, w, _ := c.GetW("/x")
	s.DropConnections()
	if !states.wait(zk.StateHasSession, 10*time.Second) {
		t.Fatal("no reconnect")
	}
	s.Set("/x", []byte("changed"))
	if ev := recvEvent(t, w); ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("event %+v", ev)
	}
}

func TestContainersAndTTL(t *testing.T) {
	s := zkserver.NewServer(zkserver.Options{TTLEnabled: true, ContainerCheckInterval: time.Hour})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := zkConnect(t, s.Addr())
	c.CreateContainer("/used", nil, 4, openACL)
	c.CreateContainer("/unused", nil, 4, openACL)
	c.Create("/used/child", nil, 0, openACL)
	if _, err := c.CreateTTL("/ttl", nil, zk.FlagTTL, openACL, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c.Delete("/used/child", -1)
	time.Sleep(100 * time.Millisecond)
	s.CheckContainers()
	for p, want := range map[string]bool{"/used": false, "/unused": true, "/ttl": false} {
		if s.Exists(p) != want {
			t.Errorf("%s exists: %v, want %v", p, !want, want)
		}
	}
	st, err := s.NodeStat("/unused")
	if err != nil || st.EphemeralOwner != 0 {
		t.Fatalf("container stat %+v %v", st, err)
	}
}

func TestMaxConnsPerIP(t *testing.T) {
	s := zkserver.NewServer(zkserver.Options{MaxConnsPerIP: 2})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newRaw(t, s.Addr())
	newRaw(t, s.Addr())
	if _, _, err := dialRaw(t, s.Addr(), 0, nil, false); err == nil {
		t.Fatal("third connection accepted")
	}
}

func TestFourLetterWords(t *testing.T) {
	s := zkserver.RunT(t)
	newRaw(t, s.Addr()).call(exists("/", true))
	ctx := context.Background()
	for cmd, want := range map[string]string{
		"ruok": "imok",
		"srvr": "Mode: standalone",
		"stat": "Clients:",
		"mntr": "zk_server_state\tstandalone",
		"cons": "lop=EXIS",
		"wchs": "Total watches:1",
	} {
		got, err := zktest.FourLetter(ctx, s.Addr(), cmd)
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %q %v, want %q", cmd, got, err, want)
		}
	}
	got, _ := zktest.FourLetter(ctx, s.Addr(), "srvr")
	if !strings.Contains(got, fmt.Sprintf("Zxid: 0x%x\n", s.Zxid())) {
		t.Errorf("srvr: %q", got)
	}
}

func TestConcurrentSequentialCreates(t *testing.T) {
	s := zkserver.RunT(t)
	s.Create("/q", nil)
	var wg sync.WaitGroup
	names := make(chan string, 200)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := zkConnect(t, s.Addr())
			for range 50 {
				p, err := c.Create("/q/n-", nil, zk.FlagSequence|zk.FlagEphemeral, openACL)
				if err != nil {
					t.Error(err)
					return
				}
				names <- p
			}
		}()
	}
	wg.Wait()
	close(names)
	seen := map[string]bool{}
	for n := range names {
		if seen[n] {
			t.Fatalf("duplicate %s", n)
		}
		seen[n] = true
	}
	if len(seen) != 200 {
		t.Fatalf("%d names", len(seen))
	}
}

func TestMalformedInputNeverBreaksServer(t *testing.T) {
	s := zkserver.RunT(t)
	inputs := [][]byte{
		{0, 0, 0, 1, 0},
		{0x7f, 0xff, 0xff, 0xff},
		{0, 0, 0, 0},
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},
	}
	for _, in := range inputs {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(in)
		nc.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		nc.Read(buf)
		nc.Close()
	}
	c := newRaw(t, s.Addr())
	if f := c.call(exists("/zookeeper", false)); f.hdr.Err != 0 {
		t.Fatalf("server unhealthy: %v", f)
	}
}
