package zkclient

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Option configures a Client.
type Option func(*config)

// Dialer opens a network connection to addr ("host:port"); ctx carries the
// connect timeout.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

type config struct {
	timeout        time.Duration
	connectTimeout time.Duration // per server; 0: timeout / number of servers
	closeTimeout   time.Duration
	tls            *tls.Config
	dial           Dialer
	chroot         string
	auth           []authInfo
	sasl           SASLMechanism
	log            *slog.Logger
	maxFrame       int // largest request frame sent
	maxReply       int // largest reply frame read
	resumeID       int64
	resumePasswd   []byte
	shuffle        bool
	onState        []func(StateEvent)
	pingFraction   float64
	obs            *Observer
	follow         bool
}

type authInfo struct {
	scheme string
	auth   []byte
}

func defaultConfig() config {
	return config{
		timeout:      10 * time.Second,
		closeTimeout: 2 * time.Second,
		maxFrame:     jute.MaxFrame,
		maxReply:     64 << 20,
		shuffle:      true,
	}
}

// WithSessionTimeout asks the server for this session timeout (default
// 10s). The server clamps it into its [minSessionTimeout,
// maxSessionTimeout] (2 to 20 ticks unless configured); Timeout reports
// what it granted. Every timing rule of the client follows from the
// granted value: a ping when nothing was sent for a third of it, the
// connection dropped when nothing was heard for two thirds.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithConnectTimeout bounds each attempt to reach one server, handshake
// included. By default it is the session timeout divided by the number of
// servers, as ZooKeeper's Java client does, but at most a third of the
// session timeout: a server that accepts a connection and never answers
// (ZooKeeper 3.8 does so to a connection that arrives while it starts,
// ZOOKEEPER-5051) then leaves time for two more attempts before the
// session expires, even with one server.
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// WithCloseTimeout bounds how long Close waits for the server to confirm
// the end of the session (default 2s).
func WithCloseTimeout(d time.Duration) Option { return func(c *config) { c.closeTimeout = d } }

// WithTLS connects over TLS (ZooKeeper 3.5+'s secureClientPort). Give the
// client's certificate in cfg.Certificates when the server requires one
// (ssl.clientAuth=need); the server then also authenticates the session
// under its x509 scheme. When cfg.ServerName is empty, the host of each
// server address is used.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithDialer opens connections with d instead of net.Dialer (a proxy, a
// Unix socket, a test's fault injection). With WithTLS, TLS runs over the
// connections d returns.
func WithDialer(d Dialer) Option { return func(c *config) { c.dial = d } }

// WithChroot makes every path relative to root: the client prefixes the
// paths it sends and strips the prefix from the paths it returns (created
// names, watch events). A chroot suffix on the server list
// ("h1:2181,h2:2181/app") does the same.
func WithChroot(root string) Option { return func(c *config) { c.chroot = root } }

// WithAuth authenticates the session with scheme and auth (for "digest":
// "user:password"). Connect fails if the server refuses them; they are sent
// again after every reconnection, before any other request.
func WithAuth(scheme string, auth []byte) Option {
	return func(c *config) {
		c.auth = append(c.auth, authInfo{scheme, append([]byte(nil), auth...)})
	}
}

// WithDigestAuth is WithAuth("digest", user:password).
func WithDigestAuth(user, password string) Option {
	return WithAuth("digest", []byte(user+":"+password))
}

// WithLogger sends the client's life events (connections, failovers,
// expiry) to l. By default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithMaxFrame sets the largest request the client sends, in bytes
// (default 1 MiB - 1, ZooKeeper's jute.maxbuffer); a larger request fails
// with ErrTooLarge before it is sent, since the server would drop the
// connection. Raise it only with the server's jute.maxbuffer.
func WithMaxFrame(n int) Option { return func(c *config) { c.maxFrame = n } }

// WithSession resumes an existing session (id and password, from
// Credentials) instead of opening a new one. If the server does not know
// the session, Connect fails with ErrSessionExpired.
func WithSession(id int64, password []byte) Option {
	return func(c *config) {
		c.resumeID, c.resumePasswd = id, append([]byte(nil), password...)
	}
}

// WithoutShuffle tries the servers in the order given instead of a random
// one (for tests that must know which member a client starts on).
func WithoutShuffle() Option { return func(c *config) { c.shuffle = false } }

// WithStateCallback calls f with each state change, in order, on the
// client's own goroutine, under its lock: f must return quickly and must
// not call the Client. Each callback given is called, in the order given.
// States gives the same events to a reader that may be slow.
func WithStateCallback(f func(StateEvent)) Option {
	return func(c *config) { c.onState = append(c.onState, f) }
}

// WithPingFraction makes the client send a ping whenever it has sent none
// for f x the negotiated timeout, even while other requests flow (by
// default it pings only when it has sent nothing for a third of the
// timeout). It keeps Confirmed fresh for code that acts on its age, such
// as strict loss detection, at the cost of one small packet per interval.
func WithPingFraction(f float64) Option { return func(c *config) { c.pingFraction = f } }

// WithFollowConfig makes the client follow the ensemble's membership
// (ZooKeeper 3.5+ with dynamic reconfiguration): it reads ConfigPath
// with a watch once connected, and again each time it changes, and gives
// the members' client addresses to SetServers, which replaces the server
// list and moves the session when balance asks for it. So a client
// started with one member's address finds the others, and one whose
// server leaves the ensemble moves to a member that stays. A
// configuration with no client addresses (a server without dynamic
// reconfiguration) leaves the list alone. It costs one watch and a
// goroutine, which Close waits for.
func WithFollowConfig() Option { return func(c *config) { c.follow = true } }
