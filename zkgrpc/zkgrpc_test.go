package zkgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkgrpc"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// One real ZooKeeper serves the package; each test works under a path of
// its own.
var (
	shared    *zktest.Cluster
	sharedErr error
)

func TestMain(m *testing.M) {
	os.Exit(zktest.RunShared(m, zktest.Options{}, func(c *zktest.Cluster, err error) { shared, sharedErr = c, err }))
}

// newSession is the session factory the resolver and the servers use:
// short sessions, so that an expiry is quick to cause.
func newSession(ctx context.Context) (*zkrecipes.Session, error) {
	return zkrecipes.NewSession(ctx, []string{shared.Addr(0)},
		zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(zktest.Bound(4*time.Second))))
}

// server is one gRPC server registered through Serve.
type server struct {
	srv    *grpc.Server
	addr   string
	served chan error
}

func serve(t *testing.T, ctx context.Context, base, id string) *server {
	t.Helper()
	return serveWith(t, ctx, newSession, base, "echo", id)
}

// serveWith is serve with a session factory and a service name of its own.
func serveWith(t *testing.T, ctx context.Context, newSession func(context.Context) (*zkrecipes.Session, error), base, name, id string) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{srv: grpc.NewServer(), addr: lis.Addr().String(), served: make(chan error, 1)}
	healthpb.RegisterHealthServer(s.srv, health.NewServer())
	go func() {
		s.served <- zkgrpc.Serve(ctx, s.srv, lis, newSession, base, zkrecipes.ServiceInstance{Name: name, ID: id, Payload: []byte(`{"zone":"z` + id + `"}`)})
	}()
	t.Cleanup(func() {
		s.srv.Stop()
		s.wait(t)
	})
	return s
}

// wait waits for Serve to return (once), failing on its error.
func (s *server) wait(t *testing.T) {
	select {
	case err, ok := <-s.served:
		if ok {
			close(s.served)
			if err != nil {
				t.Errorf("Serve %s = %v", s.addr, err)
			}
		}
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Errorf("Serve %s did not return", s.addr)
	}
}

// TestResolver: three servers registered through Serve; a client dialing
// zk:///echo with round_robin spreads its calls over the three; a server
// stopped (GracefulStop) leaves the registrations and the calls go to the
// others; restarted on a new port it is found; after the resolver's
// session expires it renews it and finds a new server.
func TestResolver(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	base := fmt.Sprintf("/zkgrpc-%s-%d", t.Name(), time.Now().UnixNano())
	admin, err := newSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	d := zkrecipes.NewDiscovery(admin, base)
	defer func() {
		for _, p := range []string{base + "/echo", base} {
			if err := admin.Client().Delete(context.Background(), p, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
				t.Errorf("delete %s: %v", p, err)
			}
		}
	}()

	servers := []*server{serve(t, ctx, base, "0"), serve(t, ctx, base, "1"), serve(t, ctx, base, "2")}

	sessions := make(chan *zkrecipes.Session, 10)
	b := zkgrpc.NewBuilder(func(ctx context.Context) (*zkrecipes.Session, error) {
		s, err := newSession(ctx)
		if err == nil {
			sessions <- s
		}
		return s, err
	}, base)
	conn := dialRoundRobin(t, b, "zk:///echo")
	spread := func(what string, want ...string) {
		t.Helper()
		spreadOver(t, ctx, conn, what, want...)
	}
	spread("calls over the three servers", servers[0].addr, servers[1].addr, servers[2].addr)

	// Stopped: its registration vanishes as the drain begins (a stream
	// still open holds GracefulStop), and calls go to the others.
	direct, err := grpc.NewClient(servers[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	wctx, endStream := context.WithCancel(ctx)
	defer endStream()
	stream, err := healthpb.NewHealthClient(direct).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Fatalf("watch on server 0: %v", err)
	}
	stopped := make(chan struct{})
	go func() { servers[0].srv.GracefulStop(); close(stopped) }()
	zktest.Eventually(t, 20*time.Second, "instance 0 unregistered while draining", func() error {
		if _, ok, err := d.Instance(ctx, "echo", "0"); ok || err != nil {
			return fmt.Errorf("instance 0 still there (%v)", err)
		}
		return nil
	})
	select {
	case <-stopped:
		t.Error("GracefulStop returned with a stream open")
	default:
	}
	endStream()
	<-stopped
	servers[0].wait(t)
	spread("calls over the two left", servers[1].addr, servers[2].addr)

	// Restarted on a new port: found.
	servers[0] = serve(t, ctx, base, "0")
	spread("calls over the restarted server too", servers[0].addr, servers[1].addr, servers[2].addr)

	// The resolver's session expires: it renews it and follows on.
	first := <-sessions
	id, pw := first.Credentials()
	if err := zktest.ExpireSession(ctx, shared.Addr(0), id, pw); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sessions:
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Fatal("the resolver asked for no new session after its session expired")
	}
	servers = append(servers, serve(t, ctx, base, "3"))
	spread("calls over a server registered after the expiry", servers[0].addr, servers[1].addr, servers[2].addr, servers[3].addr)

	// Instances carry their registration.
	insts, err := d.Instances(ctx, "echo")
	if err != nil || len(insts) != 4 || string(insts[3].Payload) != `{"zone":"z3"}` {
		t.Errorf("Instances = %+v, %v", insts, err)
	}

	// Stopping through ctx unregisters too.
	sctx, stop := context.WithCancel(ctx)
	extra := serve(t, sctx, base, "4")
	spread("calls over five", servers[0].addr, servers[1].addr, servers[2].addr, servers[3].addr, extra.addr)
	stop()
	extra.wait(t)
	if _, ok, err := d.Instance(ctx, "echo", "4"); ok || err != nil {
		t.Errorf("instance 4 after its ctx ended: %v, %v", ok, err)
	}
	for _, s := range servers {
		s.srv.GracefulStop()
		s.wait(t)
	}
}

// TestResolverNoInstances: a service without instances fails calls with
// the resolver's error, not silently, also once its only instance is
// disabled; a bad target fails at once.
func TestResolverNoInstances(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	base := fmt.Sprintf("/zkgrpc-%s-%d", t.Name(), time.Now().UnixNano())
	b := zkgrpc.NewBuilder(newSession, base)
	conn, err := grpc.NewClient("zk:///nothing", grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil || !strings.Contains(err.Error(), `no usable instance of service "nothing"`) {
		t.Errorf("call to a service without instances = %v", err)
	}

	// An instance that was usable and is disabled: calls stop going there.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	s, err := newSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	r, err := zkrecipes.NewDiscovery(s, base).Register(ctx, zkrecipes.ServiceInstance{Name: "nothing", ID: "x", Address: "127.0.0.1", Port: port})
	if err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 20*time.Second, "a call to the registered instance", func() error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	})
	in := r.Instance()
	in.Disabled = true
	if err := r.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 20*time.Second, "calls failing after the instance was disabled", func() error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil || !strings.Contains(err.Error(), `no usable instance of service "nothing"`) {
			return fmt.Errorf("call = %v", err)
		}
		return nil
	})
	if err := r.Unregister(ctx); err != nil {
		t.Error(err)
	}
	for _, p := range []string{base + "/nothing", base} {
		if err := s.Client().Delete(ctx, p, -1); err != nil {
			t.Errorf("delete %s: %v", p, err)
		}
	}

	bad, err := grpc.NewClient("zk://host/x", grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		defer bad.Close()
		_, err = healthpb.NewHealthClient(bad).Check(ctx, &healthpb.HealthCheckRequest{})
	}
	if err == nil || !strings.Contains(err.Error(), "want zk:///<service>") {
		t.Errorf("bad target = %v", err)
	}
}

// recorder is the resolver's view of a ClientConn, recording the states it
// is sent, to look at the endpoints' attributes.
type recorder struct {
	resolver.ClientConn
	states chan resolver.State
}

func (r *recorder) UpdateState(s resolver.State) error { r.states <- s; return nil }
func (r *recorder) ReportError(error)                  {}

// TestInstanceAttributes: each endpoint carries its instance, payload
// included, and filters leave instances out.
func TestInstanceAttributes(t *testing.T) {
	zktest.SkipOrFail(t, sharedErr)
	zktest.CheckLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	base := fmt.Sprintf("/zkgrpc-%s-%d", t.Name(), time.Now().UnixNano())
	s, err := newSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := zkrecipes.NewDiscovery(s, base)
	for i, zone := range []string{"a", "b"} {
		r, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "svc", ID: zone, Address: "127.0.0.1", Port: 7000 + i, Payload: []byte(`{"zone":"` + zone + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unregister(ctx)
	}
	b := zkgrpc.NewBuilder(newSession, base, zkgrpc.WithFilter(func(in zkrecipes.ServiceInstance) bool { return in.ID != "b" }))
	rec := &recorder{states: make(chan resolver.State, 10)}
	u, _ := url.Parse("zk:///svc")
	r, err := b.Build(resolver.Target{URL: *u}, rec, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	select {
	case st := <-rec.states:
		if len(st.Endpoints) != 1 || st.Endpoints[0].Addresses[0].Addr != "127.0.0.1:7000" {
			t.Fatalf("state %+v, want the one endpoint 127.0.0.1:7000", st)
		}
		in, ok := zkgrpc.Instance(st.Endpoints[0])
		if !ok || in.ID != "a" || string(in.Payload) != `{"zone":"a"}` {
			t.Errorf("Instance = %+v, %v", in, ok)
		}
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Fatal("no state sent")
	}
}

// calls makes n calls on conn and returns the servers that answered, in
// order.
func calls(ctx context.Context, conn *grpc.ClientConn, n int) ([]string, error) {
	hc := healthpb.NewHealthClient(conn)
	var out []string
	for range n {
		var p peer.Peer
		cctx, cancel := context.WithTimeout(ctx, zktest.Bound(5*time.Second))
		_, err := hc.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return out, err
		}
		out = append(out, p.Addr.String())
	}
	return out, nil
}

// dialRoundRobin dials target through the resolver builder b with the
// round_robin policy; the connection is closed when the test ends.
func dialRoundRobin(t *testing.T, b resolver.Builder, target string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithResolvers(b),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// spreadOver waits until n calls in a row on conn reach exactly want, each
// equally often (round robin over ready servers).
func spreadOver(t *testing.T, ctx context.Context, conn *grpc.ClientConn, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	zktest.Eventually(t, 30*time.Second, what, func() error {
		got, err := calls(ctx, conn, 3*len(want))
		if err != nil {
			return err
		}
		count := map[string]int{}
		for _, a := range got {
			count[a]++
		}
		keys := slices.Sorted(maps.Keys(count))
		if !slices.Equal(keys, want) {
			return fmt.Errorf("calls went to %v, want %v", got, want)
		}
		for _, c := range count {
			if c != 3 {
				return fmt.Errorf("calls went to %v: not round robin", got)
			}
		}
		return nil
	})
}
