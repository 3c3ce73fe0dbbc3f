package zkserver

import (
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
	// during a sync share the next one. Empty: in memory only.
	DataDir string

	// SnapshotCount is the number of transactions after which the whole
	// state is written to a new snapshot and a new log is started, older
	// files being removed. Default 10,000. Only used with a DataDir.
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
	return o
}

// negotiate clamps a requested session timeout in milliseconds.
func (o Options) negotiate(ms int32) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	return min(max(d, o.MinSessionTimeout), o.MaxSessionTimeout)
}
