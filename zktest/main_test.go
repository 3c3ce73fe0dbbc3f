package zktest

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// shared is a standalone server for the tests that need any server; it is
// started once in TestMain, and its start error is reported per test.
var shared struct {
	c   *Cluster
	err error
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), Bound(time.Minute))
	shared.c, shared.err = Start(ctx, Options{})
	cancel()
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedAddr returns the address of the shared server, or skips or fails
// the test if it did not start.
func sharedAddr(t *testing.T) string {
	t.Helper()
	SkipOrFail(t, shared.err)
	return shared.c.Addr(0)
}

// checkLeaks fails the test if it leaves goroutines behind once its
// cleanups have run.
func checkLeaks(t *testing.T) { CheckLeaks(t) }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Bound(30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// connectZK opens a zkclient session to the servers at addrs. The
// session is closed, and its goroutines are gone, when the test ends.
func connectZK(t *testing.T, addrs ...string) *zkclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Bound(10*time.Second))
	defer cancel()
	conn, err := zkclient.Connect(ctx, addrs, zkclient.WithSessionTimeout(Bound(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitConnected waits until conn has a live connection on its session,
// for up to Bound(timeout).
func waitConnected(t *testing.T, conn *zkclient.Client, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Bound(timeout))
	defer cancel()
	if err := conn.WaitConnected(ctx); err != nil {
		t.Fatalf("no connection after %v: %v", Bound(timeout), err)
	}
}

// testPath returns a node path that no earlier test run used, since the
// shared server keeps its nodes across runs (go test -count).
func testPath(name string) string {
	return fmt.Sprintf("/%s-%d", name, time.Now().UnixNano())
}

func exists(t *testing.T, conn *zkclient.Client, path string) bool {
	t.Helper()
	_, ok, err := conn.Exists(t.Context(), path)
	if err != nil {
		t.Fatalf("exists %s: %v", path, err)
	}
	return ok
}

// opCreate is the operation code of the create request zkclient.Client.Create
// sends (create2: the answer carries the new node's Stat).
const opCreate = 15

// rawSession is a ZooKeeper session spoken by hand, to learn its id and
// password.
type rawSession struct {
	net.Conn
	session
	xid int32
}

// rawConnect opens a session (id 0 for a new one) on a fresh connection.
func rawConnect(t *testing.T, addr string, id int64, passwd []byte) *rawSession {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, Bound(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(Bound(10 * time.Second)))
	s, err := handshake(conn, id, passwd, 30000)
	if err != nil {
		t.Fatal(err)
	}
	return &rawSession{Conn: conn, session: s}
}

// create creates an empty node with an open ACL.
func (r *rawSession) create(path string, ephemeral bool) error {
	r.xid++
	e := jute.NewFrameEncoder()
	e.Int32(r.xid)
	e.Int32(jute.OpCreate)
	e.String(path)
	e.Buffer(nil)
	e.Int32(1) // one ACL
	e.Int32(31)
	e.String("world")
	e.String("anyone")
	var flags int32
	if ephemeral {
		flags = 1
	}
	e.Int32(flags)
	if _, err := r.Write(e.Frame()); err != nil {
		return err
	}
	_, err := readReply(r, r.xid)
	return err
}

// skipIfEmbedded skips tests of the JVM's start-up and logs when Start
// runs the embedded server (ZKTEST_SERVER=zkserver, or no ZooKeeper
// installed outside CI).
func skipIfEmbedded(t *testing.T) {
	t.Helper()
	if kind, _ := serverKind(); kind == "zkserver" {
		t.Skip("tests the JVM; Start runs the embedded server here (ZKTEST_SERVER=zkserver, or no ZooKeeper installed)")
	}
}
