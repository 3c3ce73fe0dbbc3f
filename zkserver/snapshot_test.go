package zkserver_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

func TestDataDirSnapshots(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, SnapshotCount: 5}
	s := startDurable(t, opts, "127.0.0.1:0")
	c, _ := zkConnect(t, s.Addr())
	writeSome(t, c, "/p")
	for i := range 23 {
		if _, err := c.Set(t.Context(), "/p/m", fmt.Appendf(nil, "%d", i), -1); err != nil {
			t.Fatal(err)
		}
	}
	want, zxid := dump(t, s), s.Zxid()
	s.Close() // waits for a snapshot being written
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 2 {
		t.Fatalf("files in the DataDir: %v, want one snapshot and one log", names)
	}
	s2 := reopen(t, opts, want)
	if len(s2.Sessions()) != 1 || s2.Zxid() != zxid {
		t.Fatalf("sessions %v, zxid %d, want 1 session and zxid %d", s2.Sessions(), s2.Zxid(), zxid)
	}
}

// TestDataDirSnapshotFailure: a snapshot that cannot be written stops the
// server too (ZooKeeper exits), and the log still has every write.
func TestDataDirSnapshotFailure(t *testing.T) {
	dir := t.TempDir()
	fault := &faultyFsync{match: "snap."}
	s := zkserver.NewServer(zkserver.Options{DataDir: dir, SnapshotCount: 10})
	zkserver.SetFsync(s, fault.sync)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fault.armed.Store(true)
	var acked []string
	for i := 0; i < 50; i++ {
		p := fmt.Sprintf("/n%d", i)
		if err := s.Create(p, nil); err != nil {
			break
		}
		acked = append(acked, p)
	}
	select {
	case <-s.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not fail")
	}
	if !errors.Is(s.Err(), syscall.EIO) || !strings.Contains(s.Err().Error(), "snapshot") {
		t.Fatalf("Err() = %v", s.Err())
	}
	s.Close()
	fault.armed.Store(false)
	s2 := startDurable(t, zkserver.Options{DataDir: dir}, "127.0.0.1:0")
	for _, p := range acked {
		if !s2.Exists(p) {
			t.Fatalf("%s was acknowledged and is lost", p)
		}
	}
}

// TestDataDirSnapshotDoesNotStopWrites makes each snapshot's sync take
// two seconds and checks that writes go on meanwhile.
func TestDataDirSnapshotDoesNotStopWrites(t *testing.T) {
	dir := t.TempDir()
	fault := &faultyFsync{match: "snap.", delay: 2 * time.Second}
	s := zkserver.NewServer(zkserver.Options{DataDir: dir, SnapshotCount: 100})
	zkserver.SetFsync(s, fault.sync)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := zkConnect(t, s.Addr())
	for i := range 50 {
		if _, err := c.Create(t.Context(), fmt.Sprintf("/pre%d", i), []byte("x"), zkclient.Persistent, openACL); err != nil {
			t.Fatal(err)
		}
	}
	fault.armed.Store(true)
	var slowest time.Duration
	n := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		if _, err := c.Create(t.Context(), fmt.Sprintf("/w%d", n), []byte("x"), zkclient.Persistent, openACL); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
		n++
	}
	if fault.calls.Load() == 0 {
		t.Fatalf("no snapshot was taken in %d writes", n)
	}
	if slowest >= time.Second {
		t.Fatalf("a write took %v while a snapshot was synced (%d writes, %d snapshot syncs)", slowest, n, fault.calls.Load())
	}
	want := dump(t, s)
	c.Close()
	s.Close()
	fault.armed.Store(false)
	reopen(t, zkserver.Options{DataDir: dir}, want)
}
