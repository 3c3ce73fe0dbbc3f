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

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

func TestExpireSession(t *testing.T) {
	s := zkserver.RunT(t)
	ctx := t.Context()
	c, states := zkConnect(t, s.Addr())
	watcher, _ := zkConnect(t, s.Addr())
	if _, err := c.Create(ctx, "/e", nil, zkclient.Ephemeral, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := watcher.ExistsW(ctx, "/e")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ExpireSession(c.SessionID()); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, w); ev.Type != zkclient.EventNodeDeleted {
		t.Fatalf("event %+v", ev)
	}
	if !states.wait(zkclient.StateExpired, 10*time.Second) {
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
	ctx := t.Context()
	c, states := zkConnect(t, s.Addr())
	if _, err := c.Create(ctx, "/keep", []byte("v"), zkclient.Ephemeral, openACL); err != nil {
		t.Fatal(err)
	}
	id, zxid := c.SessionID(), s.Zxid()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if !states.wait(zkclient.StateReconnected, 10*time.Second) {
		t.Fatal("no reconnect")
	}
	if c.SessionID() != id || s.Zxid() != zxid {
		t.Fatalf("session %x→%x zxid %d→%d", id, c.SessionID(), zxid, s.Zxid())
	}
	data, _, err := c.Get(ctx, "/keep")
	if err != nil || string(data) != "v" {
		t.Fatalf("after restart: %q %v", data, err)
	}
}

func TestDropConnectionsKeepsWatches(t *testing.T) {
	s := zkserver.RunT(t)
	c, states := zkConnect(t, s.Addr())
	s.Create("/x", nil)
	_, _, w, err := c.GetW(t.Context(), "/x")
	if err != nil {
		t.Fatal(err)
	}
	s.DropConnections()
	if !states.wait(zkclient.StateReconnected, 10*time.Second) {
		t.Fatal("no reconnect")
	}
	s.Set("/x", []byte("changed"))
	if ev := recvEvent(t, w); ev.Type != zkclient.EventNodeDataChanged {
		t.Fatalf("event %+v", ev)
	}
}

func TestContainersAndTTL(t *testing.T) {
	s := zkserver.NewServer(zkserver.Options{TTLEnabled: true, ContainerCheckInterval: time.Hour})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	c, _ := zkConnect(t, s.Addr())
	c.Create(ctx, "/used", nil, zkclient.Container, openACL)
	c.Create(ctx, "/unused", nil, zkclient.Container, openACL)
	c.Create(ctx, "/used/child", nil, zkclient.Persistent, openACL)
	if _, err := c.CreateTTL(ctx, "/ttl", nil, zkclient.PersistentWithTTL, openACL, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c.Delete(ctx, "/used/child", -1)
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
		got, err := zkadmin.FourLetter(ctx, s.Addr(), cmd)
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %q %v, want %q", cmd, got, err, want)
		}
	}
	got, _ := zkadmin.FourLetter(ctx, s.Addr(), "srvr")
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
				p, err := c.Create(t.Context(), "/q/n-", nil, zkclient.EphemeralSequential, openACL)
				if err != nil {
					t.Error(err)
					return
				}
				names <- p.Path
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
