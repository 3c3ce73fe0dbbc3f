package zktest

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"
)

// Options configure a ZooKeeper started for tests. The zero value starts a
// standalone server with a 100ms tick and a 256 MiB heap.
type Options struct {
	// Servers is the number of members: 1 (the default) starts a
	// standalone server, n > 1 an ensemble of n members.
	Servers int

	// TickTime is ZooKeeper's tick; the default is 100ms. Sessions may
	// ask for timeouts from 2 ticks (minSessionTimeout) up to 60s
	// (maxSessionTimeout).
	TickTime time.Duration

	// Heap is the JVM's maximum heap (-Xmx), "256m" by default.
	Heap string

	// Production makes the server behave as a production one does, for
	// benchmarks: it syncs its transaction log to disk before replying
	// (forceSync=yes) and the JVM runs its optimizing compiler. Slower to
	// start. By default tests skip the sync (a killed JVM loses nothing,
	// the OS has the bytes) and the JVM favours start-up time.
	Production bool

	// TTL makes the server accept TTL nodes (ZooKeeper's
	// zookeeper.extendedTypesEnabled, off by default as in ZooKeeper;
	// zkserver's TTLEnabled under ZKTEST_SERVER=zkserver). The server
	// still removes expired TTL nodes only at its container check, every
	// minute.
	TTL bool

	// TLS makes every member also serve TLS clients on a secure client
	// port (SecureAddrs), beside the plain one (Addrs). Start generates a
	// throwaway CA, a server certificate and a client certificate
	// (ClientTLS, TLSFiles); the server requires a client certificate
	// signed by that CA and authenticates the session under the x509
	// scheme as TLSClientID. Only the client ports change: the members
	// talk to each other in plain text.
	//
	// The cost: TLS switches the members to ZooKeeper's Netty connection
	// factory, which then serves the plain port too, and needs Netty's
	// jars (Debian's libnetty-java, which the zookeeper package pulls
	// in). Each member takes about 80 MB more memory (resident ~140 MB
	// instead of ~60 MB) and a standalone server about 0.4s longer to
	// start (~0.85s instead of ~0.45s), most of it loading and compiling
	// Netty and the JDK's TLS code, and Start waits for a TLS handshake
	// on every secure port. A TLS cluster always runs real ZooKeeper,
	// also under ZKTEST_SERVER=zkserver, since the embedded server has
	// no TLS.
	TLS bool

	// SASLUsers, if not empty, lets these users (name to password) log
	// in with SASL DIGEST-MD5, as ZooKeeper's JAAS configuration does:
	// Start writes a JAAS file whose Server section lists them
	// (user_<name>="<password>"), passes it to the JVM
	// (-Djava.security.auth.login.config) and registers the sasl
	// authentication provider, so that ACLs may name sasl:<user>.
	// Sessions that do not use SASL are still served. User names are
	// limited to letters, digits and . _ - $ * (what a JAAS option name
	// can hold). SASL costs no measurable start-up time. Under
	// ZKTEST_SERVER=zkserver the embedded server is configured with the
	// same users.
	SASLUsers map[string]string

	// RequireSASL makes the server refuse a session whose connection
	// sends anything but SASL before it has authenticated
	// (sessionRequireClientSASLAuth=true): it answers error -124
	// (session closed: SASL authentication required) and closes the
	// connection. Needs SASLUsers or Kerberos.
	RequireSASL bool

	// Kerberos, if set, makes the server accept SASL GSSAPI (Kerberos 5)
	// logins of the principals of that KDC (StartKDC): Start creates the
	// service principal KerberosServerPrincipal with a keytab and gives
	// the server a JAAS Server section that logs it in from there
	// (Krb5LoginModule, accept only) and the KDC's krb5.conf. A session
	// is then known as sasl:<its principal>. ZooKeeper's server offers
	// one SASL mechanism: GSSAPI when its JAAS section holds a Kerberos
	// principal, else DIGEST-MD5, so Start refuses Kerberos together
	// with SASLUsers. RequireSASL applies. A Kerberos server always runs
	// real ZooKeeper, also under ZKTEST_SERVER=zkserver (zkserver has no
	// Kerberos).
	Kerberos *KDC

	// AdminServer turns on ZooKeeper's AdminServer, its HTTP interface
	// (admin.enableServer), on a free loopback port of each member:
	// AdminURL gives its root URL, for zkadmin.Command. It costs each
	// member Jetty's start-up. The embedded server (ZKTEST_SERVER=zkserver)
	// has no AdminServer: with it, AdminURL returns "".
	AdminServer bool

	// Reconfig enables ZooKeeper 3.5+'s dynamic reconfiguration
	// (reconfigEnabled=true) on an ensemble: clients may read the
	// membership from /zookeeper/config and change it with reconfig, and
	// AddMember starts a new member for them to add. Each server line then
	// carries the member's client address
	// ("server.N=127.0.0.1:peer:election:participant;127.0.0.1:client"),
	// as a configuration read by clients must. Changing the membership
	// needs the super user: a session that authenticates with digest
	// SuperUser:SuperPassword may write /zookeeper/config. It implies
	// real ZooKeeper (the embedded server has no reconfiguration).
	Reconfig bool

	// RealZooKeeper makes Start run real ZooKeeper whatever ServerEnv
	// says and whether or not it is installed: a test that compares
	// zkserver with ZooKeeper, or tests ZooKeeper itself, sets it. Without
	// Java or ZooKeeper, StartT then skips the test (fails it in CI).
	RealZooKeeper bool

	// Log receives the standard output and error of every member. By
	// default each member writes to zookeeper.log in its own temporary
	// directory. Either way, startup errors quote the end of the log.
	Log io.Writer
}

func (o Options) withDefaults() Options {
	if o.Servers <= 0 {
		o.Servers = 1
	}
	if o.TickTime <= 0 {
		o.TickTime = 100 * time.Millisecond
	}
	if o.Heap == "" {
		o.Heap = "256m"
	}
	return o
}

// config renders the zoo.cfg of member m. Ensembles (len(peers) > 1) get
// server.N lines; a single member gets a plain standalone configuration.
// With t, the member also serves TLS on its secure port.
func config(opts Options, m *member, peers []*member, t *tlsMaterial) string {
	tick := max(opts.TickTime.Milliseconds(), 1)
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", args...)
	}
	line("tickTime=%d", tick)
	line("dataDir=%s", m.dataDir)
	if !opts.Reconfig {
		// With Reconfig the server lines carry the client address.
		line("clientPort=%d", m.clientPort)
		line("clientPortAddress=127.0.0.1")
	}
	line("minSessionTimeout=%d", 2*tick)
	line("maxSessionTimeout=%d", max(60000, 2*tick))
	line("maxClientCnxns=0")
	line("4lw.commands.whitelist=*")
	if m.adminPort != 0 {
		line("admin.enableServer=true")
		line("admin.serverAddress=127.0.0.1")
		line("admin.serverPort=%d", m.adminPort)
	} else {
		line("admin.enableServer=false")
	}
	if opts.Production {
		line("forceSync=yes")
	} else {
		// Test data need not survive a machine crash; skipping fsync makes
		// writes fast. A killed JVM loses nothing, the OS has the bytes.
		line("forceSync=no")
	}
	if opts.TTL {
		// Unknown keys become "zookeeper."-prefixed system properties.
		line("extendedTypesEnabled=true")
	}
	if t != nil {
		tlsConfigLines(line, m, t)
	}
	if len(opts.SASLUsers) > 0 || opts.Kerberos != nil {
		saslConfigLines(line, opts)
	}
	if len(peers) > 1 {
		// initLimit, how long a follower may take to sync with the
		// leader at start, is an upper bound and scales (three JVMs may
		// share two busy cores). syncLimit does not: see SyncLimit.
		line("initLimit=%d", max(int64(Bound(5*time.Second)/time.Millisecond)/tick, 2))
		line("syncLimit=%d", max(SyncLimit.Milliseconds()/tick, 1))
		if opts.Reconfig {
			line("reconfigEnabled=true")
		}
		for _, p := range peers {
			if opts.Reconfig {
				// A joiner lists itself as an observer: it cannot form
				// a quorum of its own, adopts the committed
				// configuration from the leader and follows, without a
				// vote, until a reconfig adds it (ZooKeeper's
				// dynamic reconfiguration guide, "Adding servers").
				role := "participant"
				if p.joiner {
					role = "observer"
				}
				line("%s", p.spec(role))
			} else {
				line("server.%d=127.0.0.1:%d:%d", p.id, p.peerPort, p.electionPort)
			}
		}
	}
	return b.String()
}

// SuperUser and SuperPassword are the digest credentials of the super
// user of a cluster started with Options.Reconfig: a session that adds
// them (zkclient.WithDigestAuth(SuperUser, SuperPassword)) passes every
// ACL check, /zookeeper/config's included.
const (
	SuperUser     = "super"
	SuperPassword = "zktest"
)

// superDigest is ZooKeeper's DigestAuthenticationProvider digest of
// SuperUser:SuperPassword: user:base64(sha1(user:password)).
func superDigest() string {
	sum := sha1.Sum([]byte(SuperUser + ":" + SuperPassword))
	return SuperUser + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// SyncLimit is an ensemble's syncLimit x tickTime: how long a follower may
// go without hearing from its leader before it gives up on it, and so how
// long a follower cut off from its leader goes on answering its clients.
// It is not scaled with [Scale]: tests of strict mode rely on it staying
// below a session timeout minus the strict margin (3 s - 1.5 s), and a
// checker that allows for it (nemesis's expiry slack) takes this value.
// It is twice ZooKeeper's common 5 ticks of 100 ms, so a member paused
// for a few hundred milliseconds on a loaded machine is not dropped.
const SyncLimit = time.Second
