package zkserver_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

// TestDataDirDurableBeforeReply copies the DataDir of a running server
// right after each reply, as a crash would leave it, and loads the copy.
func TestDataDirDurableBeforeReply(t *testing.T) {
	dir := t.TempDir()
	s := startDurable(t, zkserver.Options{DataDir: dir}, "127.0.0.1:0")
	c, _ := zkConnect(t, s.Addr())
	for i := range 20 {
		p := fmt.Sprintf("/d%d", i)
		if _, err := c.Create(t.Context(), p, []byte("x"), zkclient.Persistent, openACL); err != nil {
			t.Fatal(err)
		}
		crashed := t.TempDir()
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(crashed, filepath.Base(name)), b, 0o644)
		}
		s2 := startDurable(t, zkserver.Options{DataDir: crashed}, "127.0.0.1:0")
		if !s2.Exists(p) {
			t.Fatalf("%s replied but not in the log", p)
		}
		s2.Close()
	}
}

// TestDataDirFsyncFailure: when a sync of the log fails, the writes
// waiting for it get no reply (the connection closes), the server stops
// acknowledging anything and stops serving, Err says why, and a new
// server on the DataDir has every write that was acknowledged.
func TestDataDirFsyncFailure(t *testing.T) {
	dir := t.TempDir()
	fault := &faultyFsync{match: "log."}
	s := zkserver.NewServer(zkserver.Options{DataDir: dir})
	zkserver.SetFsync(s, fault.sync)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr()
	a := newRaw(t, addr)
	b := newRaw(t, addr)
	if f := a.call(create("/acked", "x", 0)); f.hdr.Err != 0 {
		t.Fatalf("create: %d", f.hdr.Err)
	}
	fault.armed.Store(true)
	// Two writes, on two connections, wait for the failing sync.
	a.send(create("/lost-a", "", 0))
	b.send(create("/lost-b", "", 0))
	if err := s.Create("/lost-helper", nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Create whose sync failed: %v, want the injected EIO", err)
	}
	for _, c := range []*rawClient{a, b} {
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if f, err := c.readFrame(); err == nil {
			t.Fatalf("a write whose sync failed was answered: %v", f)
		}
	}
	select {
	case <-s.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not fail")
	}
	if err := s.Err(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Err() = %v, want the injected EIO", err)
	}
	if err := s.Create("/helper", nil); err == nil {
		t.Fatal("Create on a failed server succeeded")
	}
	// Nothing more is acknowledged: a new connection gets no session.
	if c, resp, err := dialRaw(t, addr, 0, nil, false); err == nil && resp.SessionID != 0 {
		f := c.call(exists("/acked", false))
		t.Fatalf("a failed server gave a session and answered: %v", f)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a failed server succeeded")
	}
	s.Close()

	fault.armed.Store(false)
	s2 := startDurable(t, zkserver.Options{DataDir: dir}, "127.0.0.1:0")
	if !s2.Exists("/acked") {
		t.Fatal("an acknowledged write is lost")
	}
}
