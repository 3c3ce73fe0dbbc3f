// Package zktest runs real Apache ZooKeeper servers for tests, and injects
// the faults that coordination code must survive: members killed, stalled
// and restarted, links delayed, paused, blackholed or cut, sessions
// expired.
//
//	c := zktest.StartT(t, zktest.Options{Servers: 3})
//	p := zktest.NewProxyT(t, c.Addr(0)) // the client connects to p.Addr()
//
// [Start] (or [StartT] inside a test) launches a standalone server or an
// ensemble of JVMs on free loopback ports, each member in its own temporary
// directory, and returns once every member serves clients. The [Cluster] it
// returns can stop, kill, pause and restart members ([Cluster.Kill],
// [Cluster.Pause], [Cluster.Restart]) to exercise failover, and
// [Cluster.Close] removes everything it started. With [Options].TLS every
// member also serves TLS clients on a secure port, with certificates made
// at Start ([Cluster.SecureAddrs], [Cluster.ClientTLS], [Cluster.TLSFiles]).
// With [Options].SASLUsers the server gets a JAAS file and accepts SASL
// DIGEST-MD5 logins of those users; [StartKDC] runs a Kerberos KDC (MIT's,
// from Debian's krb5-kdc) and [Options].Kerberos a server that accepts
// GSSAPI logins of its principals. The package's examples show Start and
// Proxy at work; they need Java, so they are compiled, not run.
//
// For fault injection between one client and one server, [Proxy] forwards
// TCP connections and can delay, pause, blackhole or cut them, including a
// one-shot trap that cuts a connection right after a chosen ZooKeeper
// request ([Proxy.CutOnRequest]). [ExpireSession] forces a session to expire
// on the server. To ask a server about itself (four-letter words, the
// AdminServer, which [Options].AdminServer turns on), use package
// [github.com/zkrecipes/zkrecipes/zkclient/zkadmin].
//
// Tests wait for what they can observe, never for a guessed time: [Bound]
// stretches an upper time bound by [Scale] ($ZKTEST_SCALE, doubled under
// the race detector) and [Eventually] polls a condition until that bound.
// [NoSessions] tells at the end of a package that its tests left no
// session on a shared server, and [CheckLeaks] that a test left no
// goroutine.
//
// With the environment variable ZKTEST_SERVER=zkserver, Start runs a
// standalone server in process with the embedded zkserver instead of a JVM
// (ensembles still run ZooKeeper); ZKTEST_SERVER=zookeeper requires the
// real thing.
//
// The package runs Java and ZooKeeper (3.8 is tested). It looks for the
// Debian package layout (/usr/share/java/zookeeper.jar, installed with
// "apt-get install -y zookeeper") unless ZOOKEEPER_HOME names an unpacked
// release; ZKTEST_JAVA selects the java binary. [Available] reports what is
// missing, and [SkipOrFail] skips a test for it (fails it when CI is set).
// With ZKTEST_SERVER unset and neither installed, outside CI, Start hands
// out the embedded server instead, says so once on standard error, and
// reports what only real ZooKeeper has (an ensemble, TLS, Kerberos,
// [Options].RealZooKeeper, [Cluster.Pause]) as missing, so that
// SkipOrFail skips the tests that need it; see [ServerEnv].
package zktest
