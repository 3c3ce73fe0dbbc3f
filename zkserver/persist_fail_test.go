package zkserver_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
)

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

// faultyFsync is a fsync that fails, while armed, for the files whose
// name contains match.
type faultyFsync struct {
	match string
	armed atomic.Bool
	delay time.Duration // while armed, sleep this long instead of failing
	calls atomic.Int64  // armed calls
}

func (f *faultyFsync) sync(file *os.File) error {
	if f.armed.Load() && strings.Contains(filepath.Base(file.Name()), f.match) {
		f.calls.Add(1)
		if f.delay > 0 {
			time.Sleep(f.delay)
			return file.Sync()
		}
		return fmt.Errorf("injected fsync failure of %s: %w", file.Name(), syscall.EIO)
	}
	return file.Sync()
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
		if _, err := c.Create(fmt.Sprintf("/pre%d", i), []byte("x"), 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	fault.armed.Store(true)
	var slowest time.Duration
	n := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		if _, err := c.Create(fmt.Sprintf("/w%d", n), []byte("x"), 0, openACL); err != nil {
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
	s2 := startDurable(t, zkserver.Options{DataDir: dir}, "127.0.0.1:0")
	sameTree(t, want, dump(t, s2))
}
