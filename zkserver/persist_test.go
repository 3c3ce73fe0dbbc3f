package zkserver_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zkserver"
)

// startDurable starts a server on dir and addr, retrying while the old
// port lingers.
func startDurable(t *testing.T, opts zkserver.Options, addr string) *zkserver.Server {
	t.Helper()
	var err error
	for range 50 {
		s := zkserver.NewServer(opts)
		if err = s.Start(addr); err == nil {
			t.Cleanup(s.Close)
			return s
		}
		s.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// dump returns every node below /, except /zookeeper, with its data and
// stat.
func dump(t *testing.T, s *zkserver.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		data, err := s.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.NodeStat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = fmt.Sprintf("%q %+v", data, st)
		kids, err := s.Children(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if p == "/" && k == "zookeeper" {
				continue
			}
			walk(strings.TrimSuffix(p, "/") + "/" + k)
		}
	}
	walk("/")
	return out
}

func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %s, want %s", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected node %s", p, got[p])
		}
	}
}

// writeSome runs a mix of transactions from a client.
func writeSome(t *testing.T, c *zk.Conn, prefix string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Create(prefix, []byte("root"), 0, openACL)
	must(err)
	_, err = c.Create(prefix+"/a", []byte("1"), 0, openACL)
	must(err)
	for i := range 3 {
		_, err = c.Set(prefix+"/a", fmt.Appendf(nil, "v%d", i), -1)
		must(err)
	}
	for range 3 {
		_, err = c.Create(prefix+"/seq-", nil, zk.FlagSequence, openACL)
		must(err)
	}
	must(c.Delete(prefix+"/seq-0000000001", -1))
	_, err = c.SetACL(prefix+"/a", zk.WorldACL(zk.PermRead|zk.PermWrite), -1)
	must(err)
	_, err = c.Multi(&zk.CreateRequest{Path: prefix + "/m", Data: []byte("m"), Acl: openACL},
		&zk.CreateRequest{Path: prefix + "/m/x", Acl: openACL},
		&zk.SetDataRequest{Path: prefix, Data: []byte("r2"), Version: -1})
	must(err)
	_, err = c.Multi(&zk.DeleteRequest{Path: prefix + "/m/x", Version: -1},
		&zk.DeleteRequest{Path: prefix + "/m", Version: -1},
		&zk.CreateRequest{Path: prefix + "/m", Data: []byte("again"), Acl: openACL},
		&zk.CreateRequest{Path: prefix + "/m/y", Acl: openACL},
		&zk.CreateRequest{Path: prefix + "/gone", Acl: openACL},
		&zk.DeleteRequest{Path: prefix + "/gone", Version: -1})
	must(err)
	_, err = c.Multi(&zk.CreateRequest{Path: prefix + "/never", Acl: openACL},
		&zk.DeleteRequest{Path: prefix + "/nope", Version: -1})
	if !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("failed multi: %v", err)
	}
	_, err = c.Create(prefix+"/a", nil, 0, openACL) // a failed write takes a zxid too
	if !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create twice: %v", err)
	}
}

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

	s2 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s2))
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
	wantSeq, err := cm.Create("/p/seq-", nil, zk.FlagSequence, openACL)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := zkConnect(t, s2.Addr())
	p, err := c2.Create("/p/seq-", nil, zk.FlagSequence, openACL)
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
	want = dump(t, s2)
	s2.Close()
	s3 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s3))
}

func TestDataDirSnapshots(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, SnapshotCount: 5}
	s := startDurable(t, opts, "127.0.0.1:0")
	c, _ := zkConnect(t, s.Addr())
	writeSome(t, c, "/p")
	for i := range 23 {
		if _, err := c.Set("/p/m", fmt.Appendf(nil, "%d", i), -1); err != nil {
			t.Fatal(err)
		}
	}
	want, zxid := dump(t, s), s.Zxid()
	s.Close() // waits for a snapshot being written
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 2 {
		t.Fatalf("files in the DataDir: %v, want one snapshot and one log", names)
	}
	s2 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s2))
	if len(s2.Sessions()) != 1 || s2.Zxid() != zxid {
		t.Fatalf("sessions %v, zxid %d, want 1 session and zxid %d", s2.Sessions(), s2.Zxid(), zxid)
	}
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

	s2 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s2))
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
	s3 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, before, dump(t, s3))

	// Appending after a torn tail works.
	if err := s3.Create("/later2", nil); err != nil {
		t.Fatal(err)
	}
	want = dump(t, s3)
	s3.Close()
	s4 := startDurable(t, opts, "127.0.0.1:0")
	sameTree(t, want, dump(t, s4))
}

func TestDataDirEphemeralSurvivesQuickRestart(t *testing.T) {
	dir := t.TempDir()
	opts := zkserver.Options{DataDir: dir, TickTime: 50 * time.Millisecond}
	s := startDurable(t, opts, "127.0.0.1:0")
	addr := s.Addr()
	c, _ := zkConnect(t, addr) // 4s session timeout
	if _, err := c.Create("/e", []byte("mine"), zk.FlagEphemeral, openACL); err != nil {
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
		data, _, err := c.Get("/e")
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
	c, _, err := zk.Connect([]string{s.Addr()}, time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/e", nil, zk.FlagEphemeral, openACL); err != nil {
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

// TestDataDirDurableBeforeReply copies the DataDir of a running server
// right after each reply, as a crash would leave it, and loads the copy.
func TestDataDirDurableBeforeReply(t *testing.T) {
	dir := t.TempDir()
	s := startDurable(t, zkserver.Options{DataDir: dir}, "127.0.0.1:0")
	c, _ := zkConnect(t, s.Addr())
	for i := range 20 {
		p := fmt.Sprintf("/d%d", i)
		if _, err := c.Create(p, []byte("x"), 0, openACL); err != nil {
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
