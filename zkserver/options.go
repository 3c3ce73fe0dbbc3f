package zkserver

import (
	"crypto/tls"
	"maps"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// Options configure a Server. The zero value is usable: a 100ms tick,
// session timeouts between 2 ticks and 60 seconds, no limit on
// connections per address, TTL nodes disabled, containers checked every
// minute, in memory only (no DataDir).
type Options struct {
	// TickTime is the server's basic time unit; sessions are checked for
	// expiry once per tick. Default 100ms.
	TickTime time.Duration

	// MinSessionTimeout and MaxSessionTimeout bound the timeout a client
	// may negotiate. Defaults: 2 ticks and 60 seconds (ZooKeeper's own
	// default maximum is 20 ticks; 60s is what zktest configures).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// MaxConnsPerIP limits the concurrent connections from one IP
	// address (ZooKeeper's maxClientCnxns); 0 means no limit.
	MaxConnsPerIP int

	// TTLEnabled allows TTL nodes (ZooKeeper's
	// zookeeper.extendedTypesEnabled). Without it createTTL fails with
	// Unimplemented, as on a default ZooKeeper.
	TTLEnabled bool

	// ContainerCheckInterval is how often empty container nodes and
	// expired TTL nodes are removed. Default 60 seconds, as ZooKeeper's
	// znode.container.checkIntervalMs; Server.CheckContainers runs the
	// check at once.
	ContainerCheckInterval time.Duration

	// MaxFrame is the largest request frame accepted (jute.maxbuffer);
	// default 1,048,575 bytes. Larger frames close the connection.
	MaxFrame int

	// DataDir, if set, makes the server durable: the first Start loads
	// the newest snapshot in the directory (created if missing) and
	// replays the transaction log after it, so the tree, the zxid and the
	// sessions survive a restart of the process; restored sessions get
	// their full timeout from the restart to reconnect. Every transaction
	// is appended to the log and synced to disk before its reply (and any
	// later reply on the connection) is sent; transactions that arrive
	// during a sync share the next one. The direct helpers (Create, Set,
	// Delete) return once their transaction is synced. If a write or
	// sync of the log or of a snapshot fails, the server stops as
	// ZooKeeper does: the replies waiting for it are never sent, nothing
	// more is acknowledged, the ports and connections close, and Err and
	// Failed report it. Empty: in memory only.
	DataDir string

	// TLS, if set, makes the server also serve TLS clients on a secure
	// client port (ZooKeeper's secureClientPort), at SecureAddr. Set
	// Certificates to the server's certificate. To authenticate clients
	// by certificate, as ZooKeeper's x509 scheme does, set ClientCAs and
	// ClientAuth to tls.RequireAndVerifyClientCert (ZooKeeper's
	// ssl.clientAuth=need: a client without a certificate signed by
	// those CAs fails the handshake) or tls.VerifyClientCertIfGiven:
	// a session whose connection presented a verified certificate is
	// then authenticated as x509:<subject>, the subject as Java's
	// X500Principal.getName() writes it ("CN=client,O=Example"), and
	// ACLs may use the x509 scheme (which a server without TLS refuses,
	// as ZooKeeper without a secure port does). The plain port, if any,
	// stays. The configuration is not modified.
	TLS *tls.Config

	// SecureAddr is the address of the secure client port; default
	// "127.0.0.1:0", a free port (see Server.SecureAddr). Only used with
	// TLS.
	SecureAddr string

	// SASLUsers, if not empty, lets these users (name to password)
	// authenticate with SASL DIGEST-MD5, as ZooKeeper does with a JAAS
	// Server section (user_<name>="<password>") and its SASL
	// authentication provider: ZooKeeper's realm and names
	// ("zk-sasl-md5", "zookeeper"), quality of protection auth. A
	// connection that completes the exchange is known as sasl:<name>,
	// the name as given (no Kerberos name rules); ACLs may then use the
	// sasl scheme (invalid without SASLUsers, as on a ZooKeeper without
	// the provider), and auth ACLs include the identity. A refused
	// exchange, including an unknown user's, is answered AuthFailed and
	// closes the connection. (ZooKeeper 3.8.0 lets an unknown user in
	// with the password of the last user who authenticated,
	// ZOOKEEPER-4839; zkserver does not.) Without SASLUsers a sasl
	// request gets a null token, as from ZooKeeper without JAAS.
	SASLUsers map[string]string

	// RequireSASL makes the server answer any request but auth and sasl
	// from a connection that has not completed SASL with error -124
	// (session closed: SASL authentication required) and close the
	// connection, pings included, as ZooKeeper with
	// sessionRequireClientSASLAuth=true. A failed exchange is then also
	// answered -124. Needs SASLUsers (Start fails without).
	RequireSASL bool

	// SnapshotCount is the number of transactions after which the state
	// is written to a new snapshot and a new log is started, older files
	// being removed once the snapshot is on disk. Writes go on while the
	// snapshot is written (it is "fuzzy", as ZooKeeper's: the log after
	// it brings it up to date when loaded). Default 10,000. Only used
	// with a DataDir.
	SnapshotCount int
}

func (o Options) withDefaults() Options {
	if o.TickTime <= 0 {
		o.TickTime = 100 * time.Millisecond
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = 2 * o.TickTime
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = max(60*time.Second, o.MinSessionTimeout)
	}
	if o.ContainerCheckInterval <= 0 {
		o.ContainerCheckInterval = time.Minute
	}
	if o.SnapshotCount <= 0 {
		o.SnapshotCount = 10000
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = jute.MaxFrame
	}
	o.SASLUsers = maps.Clone(o.SASLUsers)
	if o.TLS != nil && o.SecureAddr == "" {
		o.SecureAddr = "127.0.0.1:0"
	}
	return o
}

// negotiate clamps a requested session timeout in milliseconds.
func (o Options) negotiate(ms int32) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	return min(max(d, o.MinSessionTimeout), o.MaxSessionTimeout)
}
