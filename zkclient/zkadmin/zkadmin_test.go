package zkadmin_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), zktest.Bound(30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// TestWords asks real ZooKeeper and zkserver every parsed word while a
// session holds a data watch, and checks that each answer shows it.
func TestWords(t *testing.T) {
	t.Run("zookeeper", func(t *testing.T) {
		if err := zktest.Available(); err != nil {
			zktest.SkipOrFail(t, err)
		}
		t.Setenv("ZKTEST_SERVER", "zookeeper")
		c := zktest.StartT(t, zktest.Options{})
		testWords(t, c.Addr(0))
	})
	t.Run("zkserver", func(t *testing.T) {
		s, err := zkserver.Run()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		testWords(t, s.Addr())
	})
}

func testWords(t *testing.T, addr string) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ctx := ctxFor(t)

	if ok, err := zkadmin.Ruok(ctx, addr); err != nil || !ok {
		t.Fatalf("Ruok = %v, %v; want true", ok, err)
	}
	st, err := zkadmin.Srvr(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "standalone" || !strings.HasPrefix(st.Version, "3.") || strings.Contains(st.Version, "built on") || st.NodeCount < 1 {
		t.Errorf("Srvr = %+v", st)
	}

	if d, err := zkadmin.Dump(ctx, addr); err != nil || len(d.Sessions) != 0 || len(d.Ephemerals) != 0 {
		t.Errorf("Dump of a fresh server = %+v, %v; want no sessions", d, err)
	}

	c, err := zkclient.Connect(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const p = "/zkadmin-words"
	if _, err := c.Create(ctx, p, nil, zkclient.Ephemeral, zkclient.WorldACL(zkclient.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.GetW(ctx, p); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()

	if after, err := zkadmin.Srvr(ctx, addr); err != nil || after.NodeCount != st.NodeCount+1 || after.Zxid <= st.Zxid || after.Connections < 1 {
		t.Errorf("Srvr after a create = %+v, %v; before %+v", after, err, st)
	}
	if w, err := zkadmin.Wchs(ctx, addr); err != nil || w != (zkadmin.WatchSummary{Connections: 1, Paths: 1, Watches: 1}) {
		t.Errorf("Wchs = %+v, %v; want one of each", w, err)
	}
	if w, err := zkadmin.Wchp(ctx, addr); err != nil || !slices.Equal(w[p], []int64{sid}) || len(w) != 1 {
		t.Errorf("Wchp = %v, %v; want %s watched by 0x%x", w, err, p, sid)
	}
	if w, err := zkadmin.Wchc(ctx, addr); err != nil || !slices.Equal(w[sid], []string{p}) || len(w) != 1 {
		t.Errorf("Wchc = %v, %v; want 0x%x watching %s", w, err, sid, p)
	}
	if d, err := zkadmin.Dump(ctx, addr); err != nil || !slices.Equal(d.Sessions, []int64{sid}) ||
		!maps.EqualFunc(d.Ephemerals, map[int64][]string{sid: {p}}, slices.Equal) {
		t.Errorf("Dump = %+v, %v; want session 0x%x owning %s", d, err, sid, p)
	}
	conns, err := zkadmin.Cons(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cn := range conns {
		if cn.SessionID == sid {
			found = true
			if cn.Fields["to"] == "" || cn.Fields["lop"] == "" || !strings.HasPrefix(cn.Addr, "127.0.0.1:") {
				t.Errorf("cons entry of the session: %+v", cn)
			}
		}
	}
	if !found {
		t.Errorf("Cons does not list session 0x%x: %+v", sid, conns)
	}
	m, err := zkadmin.Mntr(ctx, addr)
	if err != nil || m["zk_server_state"] != "standalone" || m["zk_znode_count"] != strconv.Itoa(st.NodeCount+1) {
		t.Errorf("Mntr = state %q, znodes %q, %v; want standalone, %d", m["zk_server_state"], m["zk_znode_count"], err, st.NodeCount+1)
	}
	_, port, _ := net.SplitHostPort(addr)
	if cf, err := zkadmin.Conf(ctx, addr); err != nil || cf["clientPort"] != port {
		t.Errorf("Conf clientPort = %q, %v; want %s", cf["clientPort"], err, port)
	}
	if env, err := zkadmin.Envi(ctx, addr); err != nil || !strings.HasPrefix(env["zookeeper.version"], st.Version) {
		t.Errorf("Envi zookeeper.version = %q, %v; want %s...", env["zookeeper.version"], err, st.Version)
	}
	if _, err := zkadmin.FourLetter(ctx, addr, "status"); err == nil {
		t.Error("a six-letter word is sent")
	}

	// A closed session leaves the session tracker at once.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zktest.NoSessions(addr, 5*time.Second); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestAdminServer runs AdminServer commands on real ZooKeeper (zkserver
// has no AdminServer).
func TestAdminServer(t *testing.T) {
	if err := zktest.Available(); err != nil {
		zktest.SkipOrFail(t, err)
	}
	t.Setenv("ZKTEST_SERVER", "zookeeper")
	c := zktest.StartT(t, zktest.Options{AdminServer: true})
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ctx := ctxFor(t)
	base := c.AdminURL(0)
	if base == "" {
		t.Fatal("no AdminServer URL")
	}
	out, err := zkadmin.Command(ctx, base, "ruok")
	if err != nil || out["command"] != "ruok" {
		t.Fatalf("ruok = %v, %v", out, err)
	}
	out, err = zkadmin.Command(ctx, base, "monitor")
	if err != nil || out["server_state"] != "standalone" {
		t.Fatalf("monitor: server_state = %v, %v; want standalone", out["server_state"], err)
	}
	if out, err := zkadmin.Command(ctx, base, "nosuchcommand"); err == nil {
		t.Fatalf("an unknown command answered %v", out)
	}
	if got := zktest.StartT(t, zktest.Options{}).AdminURL(0); got != "" {
		t.Errorf("AdminURL without Options.AdminServer = %q", got)
	}
}

// TestRefusals: a server's refusals become ErrNotAllowed and
// ErrNotServing, from a stand-in that answers as ZooKeeper 3.8 does.
func TestRefusals(t *testing.T) {
	for answer, want := range map[string]error{
		"mntr is not executed because it is not in the whitelist.\n":  zkadmin.ErrNotAllowed,
		"This ZooKeeper instance is not currently serving requests\n": zkadmin.ErrNotServing,
	} {
		_, err := zkadmin.Mntr(ctxFor(t), standIn(t, answer))
		if !errors.Is(err, want) {
			t.Errorf("answer %q: err = %v, want %v", answer, err, want)
		}
	}
}

// TestDumpOfAFollower: a follower of ZooKeeper 3.8 lists the ensemble's
// sessions in a form of its own, here as one answered (the leader's is
// a standalone server's, which TestWords checks).
func TestDumpOfAFollower(t *testing.T) {
	const answer = "SessionTracker dump:\nGlobal Sessions(2):\n" +
		"0x1000044bd560000\t10000ms\n0x2000044bd690000\t10000ms\n" +
		"ephemeral nodes dump:\nSessions with Ephemerals (1):\n0x2000044bd690000:\n\t/a\n\t/b\n" +
		"Connections dump:\nConnections Sets (1)/(2):\n2 expire at Wed Dec 02 07:11:29 UTC 2026:\n" +
		"\tip: /127.0.0.1:46044 sessionId: 0x1000044bd560000\n\tip: /127.0.0.1:46072 sessionId: 0x0\n\n"
	d, err := zkadmin.Dump(ctxFor(t), standIn(t, answer))
	want := zkadmin.SessionDump{
		Sessions:   []int64{0x1000044bd560000, 0x2000044bd690000},
		Ephemerals: map[int64][]string{0x2000044bd690000: {"/a", "/b"}},
	}
	if err != nil || !slices.Equal(d.Sessions, want.Sessions) || !maps.EqualFunc(d.Ephemerals, want.Ephemerals, slices.Equal) {
		t.Errorf("Dump = %+v, %v; want %+v", d, err, want)
	}
}

// standIn answers one four-letter word with answer, on an address of its
// own that is closed when the test ends.
func standIn(t *testing.T, answer string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.ReadFull(conn, make([]byte, 4))
		io.WriteString(conn, answer)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}
