package zkserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

func TestDataDirKeepsTreeAndZxid(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir}
	s := startDurable(t, opts, "127.0.0.1:0")
	c, _ := zkConnect(t, s.Addr())
	writeSome(t, c, "/p")
	want, zxid := dump(t, s), s.Zxid()
	c.Close()
	s.Close()
	zxid = max(zxid, s.Zxid()) // closing the session is a transaction

	s2 := reopen(t, opts, want)
	if got := s2.Zxid(); got != zxid {
		t.Fatalf("zxid after restart: %d, want %d", got, zxid)
	}
	if n := len(s2.Sessions()); n != 0 {
		t.Fatalf("closed session restored: %d sessions", n)
	}
	// The sequence continues as on a server that never restarted.
	mem := zkserver.RunT(t)
	cm, _ := zkConnect(t, mem.Addr())
	writeSome(t, cm, "/p")
	seq0, err := cm.Create(t.Context(), "/p/seq-", nil, zkclient.PersistentSequential, openACL)
	wantSeq := seq0.Path
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := zkConnect(t, s2.Addr())
	made, err := c2.Create(t.Context(), "/p/seq-", nil, zkclient.PersistentSequential, openACL)
	p := made.Path
	if err != nil || p != wantSeq {
		t.Fatalf("sequential create after restart: %q %v, want %q", p, err, wantSeq)
	}
	st, err := s2.NodeStat(p)
	if err != nil || st.Czxid <= zxid {
		t.Fatalf("new node's czxid %d, last zxid before restart %d (%v)", st.Czxid, zxid, err)
	}

	// Restart keeps logging to the DataDir.
	if err := s2.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Create("/after-restart", []byte("x")); err != nil {
		t.Fatal(err)
	}
	reload(t, s2, opts)
}

func TestDataDirTornTail(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir}
	s := startDurable(t, opts, "127.0.0.1:0")
	for i := range 5 {
		if err := s.Create(fmt.Sprintf("/n%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	want, zxid := dump(t, s), s.Zxid()
	s.Close()
	logs, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	if len(logs) != 1 {
		t.Fatalf("logs: %v", logs)
	}
	// A record cut short: its header promises 100 bytes.
	f, err := os.OpenFile(logs[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 100, 1, 2, 3, 4, 1, 1, 0})
	f.Close()

	s2 := reopen(t, opts, want)
	if s2.Zxid() != zxid {
		t.Fatalf("zxid %d, want %d", s2.Zxid(), zxid)
	}
	if err := s2.Create("/later", nil); err != nil {
		t.Fatal(err)
	}
	before := want
	s2.Close()

	// A flipped bit in the last record: its checksum fails.
	logs, _ = filepath.Glob(filepath.Join(dir, "log.*"))
	b, err := os.ReadFile(logs[0])
	if err != nil || len(b) == 0 {
		t.Fatalf("log: %d bytes, %v", len(b), err)
	}
	b[len(b)-1] ^= 1
	os.WriteFile(logs[0], b, 0o644)
	s3 := reopen(t, opts, before)

	// Appending after a torn tail works.
	if err := s3.Create("/later2", nil); err != nil {
		t.Fatal(err)
	}
	reload(t, s3, opts)
}

func TestDataDirEphemeralSurvivesQuickRestart(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, TickTime: 50 * time.Millisecond}
	s := startDurable(t, opts, "127.0.0.1:0")
	addr := s.Addr()
	c, _ := zkConnect(t, addr) // 4s session timeout
	if _, err := c.Create(t.Context(), "/e", []byte("mine"), zkclient.Ephemeral, openACL); err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	s.Close()

	s2 := startDurable(t, opts, addr)
	if got := s2.Sessions(); len(got) != 1 || got[0] != id {
		t.Fatalf("sessions after restart: %x, want [%x]", got, id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _, err := c.Get(t.Context(), "/e")
		if err == nil {
			if string(data) != "mine" {
				t.Fatalf("/e: %q", data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client did not come back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c.SessionID() != id {
		t.Fatalf("client has a new session %x, want %x", c.SessionID(), id)
	}
	time.Sleep(5 * time.Second) // beyond the timeout: the client keeps it alive
	if !s2.Exists("/e") {
		t.Fatal("ephemeral of a live session deleted")
	}

	// Closing the session is durable.
	c.Close()
	s2.Close()
	s3 := startDurable(t, opts, "127.0.0.1:0")
	if s3.Exists("/e") || len(s3.Sessions()) != 0 {
		t.Fatalf("after a closed session: /e exists %v, sessions %x", s3.Exists("/e"), s3.Sessions())
	}
}

func TestDataDirSessionExpiresAfterRestart(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, TickTime: 50 * time.Millisecond}
	s := startDurable(t, opts, "127.0.0.1:0")
	c, err := zkclient.Connect(t.Context(), []string{s.Addr()}, zkclient.WithSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), "/e", nil, zkclient.Ephemeral, openACL); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.Close() // the client is gone too: nobody comes back

	start := time.Now()
	s2 := startDurable(t, opts, "127.0.0.1:0")
	if !s2.Exists("/e") || len(s2.Sessions()) != 1 {
		t.Fatalf("after restart: /e exists %v, sessions %x", s2.Exists("/e"), s2.Sessions())
	}
	for s2.Exists("/e") {
		if time.Since(start) > 5*time.Second {
			t.Fatal("ephemeral of an abandoned session not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Fatalf("session expired after %v, before its 1s timeout", time.Since(start))
	}
	zxid := s2.Zxid()
	s2.Close()
	s3 := startDurable(t, opts, "127.0.0.1:0")
	if s3.Exists("/e") || len(s3.Sessions()) != 0 || s3.Zxid() != zxid {
		t.Fatalf("expiry not durable: /e %v, sessions %x, zxid %d want %d", s3.Exists("/e"), s3.Sessions(), s3.Zxid(), zxid)
	}
}

// TestDataDirNullData: null data stays null, and empty data empty,
// through the log, through a snapshot, and to a client after a restart.
func TestDataDirNullData(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, SnapshotCount: 1 << 30}
	s := startDurable(t, opts, "127.0.0.1:0")
	a := newRaw(t, s.Addr())
	for _, req := range []jute.Request{
		nullCreate(jute.OpCreate, "/null", 0),
		create("/empty", "", 0),
		create("/set-null", "x", 0),
		{Op: jute.OpSetData, Path: "/set-null", Data: nil, Version: -1},
		nullCreate(jute.OpCreate, "/set-empty", 0),
		setData("/set-empty", "", -1),
		multi(nullCreate(jute.OpCreate2, "/multi-null", 0), create("/multi-empty", "", 0)),
	} {
		if f := a.call(req); f.hdr.Err != 0 {
			t.Fatalf("op %d %s: error %d", req.Op, req.Path, f.hdr.Err)
		}
	}
	if err := s.Create("/helper-null", nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{ // path: null
		"/null": true, "/empty": false, "/set-null": true, "/set-empty": false,
		"/multi-null": true, "/multi-empty": false, "/helper-null": true,
	}
	check := func(s *zkserver.Server, how string) {
		t.Helper()
		c := newRaw(t, s.Addr())
		for p, null := range want {
			data, err := s.Get(p)
			if err != nil || (data == nil) != null || len(data) != 0 {
				t.Errorf("%s: Get(%s) = %#v, %v; want null %v", how, p, data, err, null)
			}
			f := c.call(getData(p, false))
			got := jute.NewDecoder(f.body).Buffer()
			if f.hdr.Err != 0 || (got == nil) != null {
				t.Errorf("%s: getData %s: error %d, data %#v; want null %v", how, p, f.hdr.Err, got, null)
			}
		}
	}
	check(s, "running")
	s.Close()
	s = startDurable(t, opts, "127.0.0.1:0") // the log replayed
	check(s, "after the log's replay")
	s.Close()
	// That start wrote the state to a snapshot and began an empty log,
	// to which only the checking client's session was added.
	s = startDurable(t, opts, "127.0.0.1:0") // the snapshot alone
	check(s, "after loading the snapshot")
}
