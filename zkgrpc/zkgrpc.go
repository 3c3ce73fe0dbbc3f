// Package zkgrpc connects gRPC to zkrecipes' service discovery (Apache
// Curator's layout): a name resolver for targets "zk:///<service>" that
// follows the service's registrations, and Serve, which keeps a gRPC
// server registered while it serves.
//
// A client dials through the resolver, with the load balancing policy of
// its choice:
//
//	b := zkgrpc.NewBuilder(newSession, "/services")
//	conn, err := grpc.NewClient("zk:///echo", grpc.WithResolvers(b),
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// and a server registers while it serves:
//
//	go zkgrpc.Serve(ctx, srv, lis, newSession, "/services", zkrecipes.ServiceInstance{Name: "echo"})
//
// It is a module of its own so that the library does not depend on gRPC.
package zkgrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/zkrecipes/zkrecipes"
)

// Scheme is the resolver's URL scheme: targets are "zk:///<service>".
const Scheme = "zk"

// Option configures a Builder.
type Option func(*builder)

// WithFilter makes the resolver leave out the instances keep returns false
// for (disabled instances are always left out, as Curator's
// ServiceProvider does).
func WithFilter(keep func(zkrecipes.ServiceInstance) bool) Option {
	return func(b *builder) { b.filters = append(b.filters, keep) }
}

// WithSSLPort makes the resolver dial the instances' SSL port (instances
// without one are left out); by default it dials their port, or their SSL
// port when they have no port.
func WithSSLPort() Option { return func(b *builder) { b.ssl = true } }

// NewBuilder returns the resolver builder for targets "zk:///<service>":
// the instances of <service> registered under basePath (see
// zkrecipes.Discovery), followed over a zkrecipes.ServiceCache.
//
// Every resolver the builder serves (one per ClientConn and target) shares
// one Session, got from newSession (the shape KeepRegistered takes) when the
// first resolver is built and closed when the last one is closed; and the
// resolvers of one service share its ServiceCache (one watch). So a process
// that dials many services, or one service over many ClientConns, through
// one builder costs one session. When the session ends (expired: after a
// cut longer than its timeout, say) the builder closes it and asks
// newSession for another, and each resolver reads its instances afresh on
// it. An error of newSession is retried after a pause (growing to 5 s).
//
// The resolver sends the ClientConn the usable instances (enabled, passing
// the filters, with an address and a port) at once and after each change,
// each as an endpoint of one address "<address>:<port>", carrying the
// instance (see Instance). When there is none, it reports an error saying so (calls
// fail with it, or wait for an instance if they WaitForReady), having sent
// the empty list first if it had sent addresses, so that calls stop going
// to instances that left or were disabled.
//
// It reports to the ClientConn (resolver.ClientConn.ReportError) every
// moment it cannot follow the server: the session's connection lost (the
// instances last sent stand, and may be stale, until the connection is
// back and they are read again), the session ended or not made (while a
// new one is made), a load of the instances that failed (retried after a
// pause). A balancer that has addresses keeps using them on such an error
// (round_robin and pick_first do); one that has none fails calls with it.
func NewBuilder(newSession func(context.Context) (*zkrecipes.Session, error), basePath string, opts ...Option) resolver.Builder {
	b := &builder{newSession: newSession, base: basePath}
	for _, o := range opts {
		o(b)
	}
	return b
}

type builder struct {
	newSession func(context.Context) (*zkrecipes.Session, error)
	base       string
	filters    []func(zkrecipes.ServiceInstance) bool
	ssl        bool

	mu  sync.Mutex
	hub *hub // the shared session while resolvers are open
}

func (b *builder) Scheme() string { return Scheme }

// Build starts a resolver for target; it fails at once for a target that
// names no service (or more than one path segment).
func (b *builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	name := target.Endpoint()
	if name == "" || strings.Contains(name, "/") || target.URL.Host != "" {
		return nil, fmt.Errorf("zkgrpc: target %q: want zk:///<service>", target.URL.String())
	}
	if b.newSession == nil {
		return nil, errors.New("zkgrpc: builder without a session factory")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &zkResolver{b: b, h: b.acquire(), name: name, cc: cc, cancel: cancel, done: make(chan struct{})}
	go r.run(ctx)
	return r, nil
}

// acquire returns the shared session's hub, started by the first resolver.
func (b *builder) acquire() *hub {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hub == nil {
		ctx, cancel := context.WithCancel(context.Background())
		b.hub = &hub{newSession: b.newSession, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
		go b.hub.run(ctx)
	}
	b.hub.refs++
	return b.hub
}

// release drops a resolver's hold on h; the last one closes the session.
func (b *builder) release(h *hub) {
	b.mu.Lock()
	h.refs--
	last := h.refs == 0
	if last && b.hub == h {
		b.hub = nil
	}
	b.mu.Unlock()
	if last {
		h.cancel()
		<-h.done
	}
}

// hub keeps the one Session of a builder's resolvers, making a new one
// when it ends.
type hub struct {
	newSession func(context.Context) (*zkrecipes.Session, error)
	refs       int // guarded by builder.mu
	cancel     context.CancelFunc
	done       chan struct{} // run returned, the session closed

	mu      sync.Mutex
	cur     *zkrecipes.Session // nil while there is none
	err     error              // why there is none (nil at first)
	changed chan struct{}      // closed (and replaced) when cur changes
}

// current returns the session (nil while there is none, with why), and a
// channel closed when that changes.
func (h *hub) current() (s *zkrecipes.Session, changed <-chan struct{}, why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur, h.changed, h.err
}

func (h *hub) set(s *zkrecipes.Session, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur, h.err = s, err
	close(h.changed)
	h.changed = make(chan struct{})
}

// run makes one session after another until ctx ends, then closes the
// last.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	pause := 100 * time.Millisecond
	for {
		s, err := h.newSession(ctx)
		if ctx.Err() != nil {
			if err == nil {
				s.Close()
			}
			return
		}
		if err != nil {
			h.set(nil, fmt.Errorf("new session: %w", err))
			select {
			case <-time.After(pause):
				pause = min(2*pause, 5*time.Second)
				continue
			case <-ctx.Done():
				return
			}
		}
		pause = 100 * time.Millisecond
		h.set(s, nil)
		select {
		case <-s.Done():
			h.set(nil, fmt.Errorf("session 0x%x ended, making a new one: %w", s.ID(), s.Err()))
			s.Close()
		case <-ctx.Done():
			s.Close()
			return
		}
	}
}

type zkResolver struct {
	b      *builder
	h      *hub
	name   string
	cc     resolver.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	sent   bool // the last update sent addresses (run's goroutine only)
}

// ResolveNow does nothing: the resolver follows a watch.
func (r *zkResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close stops the resolver; the last resolver of its builder closes the
// shared session.
func (r *zkResolver) Close() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		r.b.release(r.h)
	})
}

// report tells the ClientConn that the resolver cannot follow the server.
func (r *zkResolver) report(err error) {
	r.cc.ReportError(fmt.Errorf("zkgrpc: service %q in %s: %w", r.name, r.b.base, err))
}

// run follows the service on the builder's session, one after another,
// until ctx ends.
func (r *zkResolver) run(ctx context.Context) {
	defer close(r.done)
	pause := 100 * time.Millisecond
	var ended *zkrecipes.Session // the last session followed until its end
	for ctx.Err() == nil {
		s, changed, why := r.h.current()
		if s == nil || s == ended {
			if why != nil {
				r.report(why)
			}
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		err := r.follow(ctx, s)
		switch {
		case ctx.Err() != nil:
			return
		case s.Err() != nil:
			ended, pause = s, 100*time.Millisecond // the hub makes another
		default: // a load that failed (or a cache that stopped by itself)
			if err != nil {
				r.report(err)
			}
			select {
			case <-time.After(pause):
				pause = min(2*pause, 5*time.Second)
			case <-ctx.Done():
			}
		}
	}
}

// follow sends the instances on s to the ClientConn until ctx ends or the
// session ends (nil), or returns the error of loading them. It reports the
// session's connection lost, and sends the instances again once it is
// back.
func (r *zkResolver) follow(ctx context.Context, s *zkrecipes.Session) error {
	states := s.States()
	defer states.Close()
	c, err := zkrecipes.NewDiscovery(s, r.b.base).ServiceCache(ctx, r.name)
	if err != nil {
		return err
	}
	defer c.Close()
	following := true // the states are followed (not ended)
	for {
		changed := c.Changed()
		r.update(c.Instances())
	wait:
		for {
			var ready <-chan struct{}
			if following {
				ready = states.Ready()
			}
			select {
			case <-changed:
				break wait
			case <-ctx.Done():
				return nil
			case <-ready:
				ev, err := states.Next(ctx)
				switch {
				case err != nil:
					following = false // the end: the cache ends too
				case ev.State == zkrecipes.SessionSuspended:
					r.report(fmt.Errorf("connection to ZooKeeper lost (%v): the instances last sent may be stale", ev.Err))
				case ev.State == zkrecipes.SessionReconnected:
					break wait // the error reported is over: send them again
				}
			}
		}
		if c.Err() != nil {
			return nil
		}
	}
}

// update sends the usable instances to the ClientConn.
func (r *zkResolver) update(insts []zkrecipes.ServiceInstance) {
	var st resolver.State
	for _, in := range insts {
		a, ok := r.b.address(in)
		if !ok {
			continue
		}
		st.Addresses = append(st.Addresses, a)
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{
			Addresses:  []resolver.Address{a},
			Attributes: attributes.New(instanceKey{}, instanceValue{in}),
		})
	}
	if len(st.Addresses) > 0 || r.sent {
		// The empty list too, once addresses were sent: calls must stop
		// going to instances that left or were disabled.
		r.cc.UpdateState(st) // an error (no addresses, say) is the balancer's to act on
	}
	r.sent = len(st.Addresses) > 0
	if !r.sent {
		r.cc.ReportError(fmt.Errorf("zkgrpc: no usable instance of service %q in %s (%d registered)", r.name, r.b.base, len(insts)))
	}
}

// address returns the address to dial in, and false if it is not usable.
func (b *builder) address(in zkrecipes.ServiceInstance) (resolver.Address, bool) {
	if in.Disabled || in.Address == "" {
		return resolver.Address{}, false
	}
	for _, keep := range b.filters {
		if !keep(in) {
			return resolver.Address{}, false
		}
	}
	port := in.Port
	if b.ssl || port == 0 {
		port = in.SSLPort
	}
	if port == 0 {
		return resolver.Address{}, false
	}
	return resolver.Address{Addr: net.JoinHostPort(in.Address, strconv.Itoa(port))}, true
}

type instanceKey struct{}

// instanceValue holds an instance in an address's attributes; attributes
// compare their values, and an instance (its payload a slice) is not
// comparable with ==.
type instanceValue struct{ in zkrecipes.ServiceInstance }

func (v instanceValue) Equal(o any) bool {
	w, ok := o.(instanceValue)
	if !ok {
		return false
	}
	a, errA := json.Marshal(v.in)
	b, errB := json.Marshal(w.in)
	return errA == nil && errB == nil && string(a) == string(b)
}

// Instance returns the service instance an endpoint from the resolver
// stands for (in its Attributes), for a balancer that wants the instance's
// payload.
func Instance(e resolver.Endpoint) (zkrecipes.ServiceInstance, bool) {
	v, ok := e.Attributes.Value(instanceKey{}).(instanceValue)
	return v.in, ok
}

// Serve serves srv on lis (srv.Serve) and keeps inst registered under
// basePath meanwhile (zkrecipes.KeepRegistered, on sessions from
// newSession, across session expiry). An instance without an Address and
// Port gets those of lis (an unspecified address, as ":0" gives, needs
// inst.Address set); its Name is required.
//
// The instance is unregistered as the server stops taking connections,
// before it drains: when srv.GracefulStop or srv.Stop closes lis, or when
// ctx ends, on which Serve calls srv.GracefulStop. Serve returns once the
// server has stopped and the instance is unregistered, with srv.Serve's
// error (nil after GracefulStop or Stop) or KeepRegistered's (an instance
// it cannot register, after which Serve stops srv).
func Serve(ctx context.Context, srv *grpc.Server, lis net.Listener, newSession func(context.Context) (*zkrecipes.Session, error), basePath string, inst zkrecipes.ServiceInstance) error {
	if inst.Address == "" || (inst.Port == 0 && inst.SSLPort == 0) {
		tcp, ok := lis.Addr().(*net.TCPAddr)
		switch {
		case !ok:
			return fmt.Errorf("zkgrpc: serve %q: listener address %v is not TCP: set the instance's Address and Port", inst.Name, lis.Addr())
		case inst.Address == "" && tcp.IP.IsUnspecified():
			return fmt.Errorf("zkgrpc: serve %q: listening on the unspecified address %v: set the instance's Address", inst.Name, lis.Addr())
		}
		if inst.Address == "" {
			inst.Address = tcp.IP.String()
		}
		if inst.Port == 0 && inst.SSLPort == 0 {
			inst.Port = tcp.Port
		}
	}
	// Not derived from ctx: the instance is unregistered only when the
	// server stops taking connections (ctx's end leads there).
	kctx, unregister := context.WithCancel(context.Background())
	defer unregister()
	kept := make(chan error, 1)
	go func() { kept <- zkrecipes.KeepRegistered(kctx, newSession, basePath, inst) }()

	served := make(chan struct{})
	defer close(served)
	go func() {
		select {
		case <-ctx.Done():
			unregister()
			srv.GracefulStop()
		case err := <-kept:
			kept <- err
			if err != nil {
				srv.Stop() // an instance KeepRegistered cannot keep
			}
		case <-served:
		}
	}()
	err := srv.Serve(&closeHook{Listener: lis, onClose: unregister})
	unregister()
	return errors.Join(err, <-kept)
}

// closeHook is a listener that unregisters (see Serve) when it is closed.
type closeHook struct {
	net.Listener
	onClose func()
}

func (l *closeHook) Close() error {
	l.onClose()
	return l.Listener.Close()
}
