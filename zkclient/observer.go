package zkclient

import (
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Observer is told of what a Client does, for metrics and tracing. Every
// field is optional: a nil func is not called, and a Client without an
// Observer pays one nil check per request and allocates nothing for it.
//
// The funcs are called synchronously, on the client's own goroutines
// (Request mostly on the connection's reader, State under the client's
// lock, Watch on the reader before the event reaches any watcher), and
// concurrently with one another: they must be safe for concurrent use,
// return quickly, never block, and never call the Client. A slow func
// delays every request and watch of the session.
//
// It is a struct of funcs rather than an interface, as
// net/http/httptrace.ClientTrace is, so that an adapter sets only the
// events it wants and new events can be added without breaking it.
type Observer struct {
	// Request is called once for each request that ends: answered,
	// refused by the server, failed by a lost connection, or failed by
	// the client before it was sent (an invalid path, too large). Pings
	// and the credentials sent on each connection are not reported.
	Request func(RequestEvent)

	// Dial is called after each attempt to open a network connection to a
	// server (TLS included), with its outcome.
	Dial func(ConnEvent)

	// Connect is called after each attempt to establish the session on a
	// server (dial, handshake, SASL, restored watches) ends, with its
	// outcome: Err is nil when the session is now up on Server.
	Connect func(ConnEvent)

	// Drop is called once for each established connection that ends,
	// with its cause in Err (ErrClosed when the session was closed).
	Drop func(ConnEvent)

	// State is called with each state change, as a WithStateCallback
	// func is (under the client's lock, in order).
	State func(StateEvent)

	// Watch is called with each watch notification the server delivers,
	// once per notification, however many watches it fires.
	Watch func(Event)

	// Opened is called once for each Client that Connect returns, just
	// before it returns it, so that an adapter can read gauges of the
	// live clients at scrape time (Client.Backlog, Client.Done) rather
	// than be told of every change. An adapter that keeps the Client
	// should forget it once its Done channel is closed.
	Opened func(*Client)
}

// RequestEvent is one request's end, for Observer.Request.
type RequestEvent struct {
	Op      string        // the request's name on the wire: "create", "getData", "multi", ...
	Path    string        // the path given (empty for multi and closeSession)
	Err     error         // nil, or why it failed; errors.As finds the Code of a server's refusal
	Latency time.Duration // from the call to its end
	Sent    int           // bytes of the request frame (0 if it was not sent)
	Read    int           // bytes of the reply frame (0 if none came)
}

// ConnEvent is one connection step, for Observer.Dial, Connect and Drop.
type ConnEvent struct {
	Server  string        // "host:port"
	Err     error         // nil for a step that succeeded
	Latency time.Duration // how long the step took (Dial and Connect)
}

// WithObserver tells o of the client's requests, connections, state
// changes and watch events (see Observer). Several observers may be given;
// each is told, in the order given.
func WithObserver(o *Observer) Option {
	return func(c *config) {
		if o == nil {
			return
		}
		if prev := c.obs; prev != nil {
			o = joinObservers(prev, o)
		}
		c.obs = o
	}
}

// joinObservers returns an Observer that tells a, then b.
func joinObservers(a, b *Observer) *Observer {
	return &Observer{
		Request: join(a.Request, b.Request),
		Dial:    join(a.Dial, b.Dial),
		Connect: join(a.Connect, b.Connect),
		Drop:    join(a.Drop, b.Drop),
		State:   join(a.State, b.State),
		Watch:   join(a.Watch, b.Watch),
		Opened:  join(a.Opened, b.Opened),
	}
}

func join[E any](f, g func(E)) func(E) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(e E) { f(e); g(e) }
}

// observe tells the observer, if any, of cl's end.
func (cl *call) observe(err error) {
	o := cl.obs
	if o == nil || o.Request == nil {
		return
	}
	o.Request(RequestEvent{
		Op:      jute.OpName(cl.op),
		Path:    cl.path,
		Err:     err,
		Latency: time.Duration(cl.c.now() - cl.start),
		Sent:    int(cl.sentBytes),
		Read:    int(cl.readBytes),
	})
}
