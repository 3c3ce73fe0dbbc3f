package zkgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zkgrpc"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// errorsSeen wraps a resolver builder so that the errors its resolvers
// report to the (real) ClientConn are seen by the test too.
type errorsSeen struct {
	resolver.Builder
	mu   sync.Mutex
	errs []error
}

func (e *errorsSeen) Build(t resolver.Target, cc resolver.ClientConn, o resolver.BuildOptions) (resolver.Resolver, error) {
	return e.Builder.Build(t, &reportingConn{ClientConn: cc, e: e}, o)
}

// waitFor waits for an error reported whose text has want, after the first
// from errors seen already.
func (e *errorsSeen) waitFor(t *testing.T, from int, want string) {
	t.Helper()
	zktest.Eventually(t, 30*time.Second, "an error reported with "+want, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, err := range e.errs[from:] {
			if strings.Contains(err.Error(), want) {
				return nil
			}
		}
		return fmt.Errorf("errors reported: %v", e.errs[from:])
	})
}

func (e *errorsSeen) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs)
}

type reportingConn struct {
	resolver.ClientConn
	e *errorsSeen
}

func (c *reportingConn) ReportError(err error) {
	c.e.mu.Lock()
	c.e.errs = append(c.e.errs, err)
	c.e.mu.Unlock()
	c.ClientConn.ReportError(err)
}

// sessionLog is a session factory that remembers the sessions it made.
type sessionLog struct {
	addr    string
	timeout time.Duration
	mu      sync.Mutex
	made    []*zkrecipes.Session
}

func (l *sessionLog) newSession(ctx context.Context) (*zkrecipes.Session, error) {
	s, err := zkrecipes.NewSession(ctx, []string{l.addr},
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(l.timeout)))
	if err == nil {
		l.mu.Lock()
		l.made = append(l.made, s)
		l.mu.Unlock()
	}
	return s, err
}

func (l *sessionLog) sessions() []*zkrecipes.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.made)
}

// onServer reports whether the server lists the session id.
func onServer(ctx context.Context, id int64) (bool, error) {
	d, err := zkadmin.Dump(ctx, shared.Addr(0))
	return slices.Contains(d.Sessions, id), err
}

// adminOf returns a session for the test's own reads, which deletes the
// services' nodes under base once the test's servers have stopped (its
// cleanup runs after theirs).
func adminOf(t *testing.T, ctx context.Context, base string, services ...string) *zkrecipes.Session {
	t.Helper()
	admin, err := newSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		for _, name := range services {
			if err := admin.Client().Delete(context.Background(), base+"/"+name, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
				t.Errorf("delete %s: %v", name, err)
			}
		}
		if err := admin.Client().Delete(context.Background(), base, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			t.Errorf("delete %s: %v", base, err)
		}
	})
	return admin
}

// TestResolverCut: the resolver's link to ZooKeeper is cut for longer than
// its session timeout. It reports the lost connection to the ClientConn,
// calls go on to the servers last resolved meanwhile; once the link is
// back it reports its session's end, makes a new session, and finds a
// server registered during the cut (and not one stopped). Then a server's
// own session expires: Serve registers it again and calls reach it.
func TestResolverCut(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
	defer cancel()
	base := fmt.Sprintf("/zkgrpc-%s-%d", t.Name(), time.Now().UnixNano())
	admin := adminOf(t, ctx, base, "echo")
	p, err := zktest.NewProxy(shared.Addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// The servers' sessions are direct; the resolver's go through p, short.
	srvSessions := &sessionLog{addr: shared.Addr(0), timeout: zktest.Bound(4 * time.Second)}
	servers := []*server{serveWith(t, ctx, srvSessions.newSession, base, "echo", "0"), serve(t, ctx, base, "1")}
	log := &sessionLog{addr: p.Addr(), timeout: zktest.Bound(1500 * time.Millisecond)}
	b := &errorsSeen{Builder: zkgrpc.NewBuilder(log.newSession, base)}
	conn := dialRoundRobin(t, b, "zk:///echo")
	spreadOver(t, ctx, conn, "calls over the two servers", servers[0].addr, servers[1].addr)
	first := log.sessions()[0]

	// Cut: connections closed, new ones refused.
	from := b.count()
	p.Refuse(true)
	p.Cut()
	b.waitFor(t, from, "connection to ZooKeeper lost")
	// The addresses resolved last stand: calls go on.
	spreadOver(t, ctx, conn, "calls over the two servers during the cut", servers[0].addr, servers[1].addr)
	// Meanwhile server 1 stops, server 2 comes.
	servers[1].srv.GracefulStop()
	servers[1].wait(t)
	servers = append(servers, serve(t, ctx, base, "2"))
	zktest.Eventually(t, 30*time.Second, "the resolver's session expired on the server", func() error {
		if on, err := onServer(ctx, first.ID()); on || err != nil {
			return fmt.Errorf("session 0x%x still on the server (%v)", first.ID(), err)
		}
		return nil
	})
	from = b.count()
	p.Refuse(false)
	b.waitFor(t, from, fmt.Sprintf("session 0x%x ended", first.ID()))
	spreadOver(t, ctx, conn, "calls over server 0 and the one registered during the cut", servers[0].addr, servers[2].addr)
	if n := len(log.sessions()); n < 2 {
		t.Errorf("%d sessions made, want a new one after the expiry", n)
	}

	// Server 0's own session expires: Serve registers it again (a new
	// ephemeral node, of a new session), and calls keep reaching it.
	path := base + "/echo/0"
	st, ok, err := admin.Exists(ctx, path)
	if err != nil || !ok {
		t.Fatalf("instance 0: %v, %v", ok, err)
	}
	id, pw := srvSessions.sessions()[0].Credentials()
	if err := zktest.ExpireSession(ctx, shared.Addr(0), id, pw); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 30*time.Second, "instance 0 registered again on a new session", func() error {
		st2, ok, err := admin.Exists(ctx, path)
		if err != nil || !ok || st2.EphemeralOwner == st.EphemeralOwner {
			return fmt.Errorf("instance 0: there %v, owner 0x%x (was 0x%x), %v", ok, st2.EphemeralOwner, st.EphemeralOwner, err)
		}
		return nil
	})
	spreadOver(t, ctx, conn, "calls over server 0, registered again, and server 2", servers[0].addr, servers[2].addr)
	conn.Close()
	for _, s := range log.sessions() {
		select {
		case <-s.Done():
		case <-time.After(zktest.Bound(10 * time.Second)):
			t.Errorf("session 0x%x not closed after the ClientConn closed", s.ID())
		}
	}
}

// TestSharedSession: the ClientConns a builder serves, for one service or
// several, share one session, closed when the last ClientConn closes.
func TestSharedSession(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	base := fmt.Sprintf("/zkgrpc-%s-%d", t.Name(), time.Now().UnixNano())
	adminOf(t, ctx, base, "echo", "other")
	echo := serve(t, ctx, base, "0")
	other := serveWith(t, ctx, newSession, base, "other", "0")

	log := &sessionLog{addr: shared.Addr(0), timeout: zktest.Bound(4 * time.Second)}
	b := zkgrpc.NewBuilder(log.newSession, base)
	dial := func(target string) *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient(target, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	conns := []*grpc.ClientConn{dial("zk:///echo"), dial("zk:///echo"), dial("zk:///other")}
	for i, want := range []string{echo.addr, echo.addr, other.addr} {
		spreadOver(t, ctx, conns[i], fmt.Sprintf("calls of ClientConn %d", i), want)
	}
	made := log.sessions()
	if len(made) != 1 {
		t.Fatalf("%d sessions for three ClientConns, want 1", len(made))
	}
	s := made[0]
	// One watch per service, on the one session.
	w, err := zkadmin.Wchc(ctx, shared.Addr(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(w[s.ID()])); !slices.Equal(got, []string{base + "/echo", base + "/other"}) {
		t.Errorf("session 0x%x watches %v, want the two services", s.ID(), got)
	}

	conns[0].Close()
	conns[2].Close()
	spreadOver(t, ctx, conns[1], "calls of the ClientConn left", echo.addr)
	if s.Err() != nil {
		t.Fatalf("the session ended with a ClientConn left: %v", s.Err())
	}
	conns[1].Close()
	select {
	case <-s.Done():
	case <-time.After(zktest.Bound(10 * time.Second)):
		t.Fatal("the session is open after the last ClientConn closed")
	}
	zktest.Eventually(t, 10*time.Second, "the session gone from the server", func() error {
		if on, err := onServer(ctx, s.ID()); on || err != nil {
			return fmt.Errorf("session 0x%x on the server (%v)", s.ID(), err)
		}
		return nil
	})

	// A ClientConn after that gets a new session.
	conn := dial("zk:///echo")
	spreadOver(t, ctx, conn, "calls of a new ClientConn", echo.addr)
	conn.Close()
	if n := len(log.sessions()); n != 2 {
		t.Errorf("%d sessions made, want 2", n)
	}
	for _, s := range log.sessions() {
		select {
		case <-s.Done():
		case <-time.After(zktest.Bound(10 * time.Second)):
			t.Errorf("session 0x%x open after every ClientConn closed", s.ID())
		}
	}
}
