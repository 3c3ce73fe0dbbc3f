// Package zktest runs real Apache ZooKeeper servers for tests.
//
// Start (or StartT inside a test) launches a standalone server or an
// ensemble of JVMs on free loopback ports, each member in its own temporary
// directory, and returns once every member serves clients. The Cluster it
// returns can stop, kill and restart members to exercise failover, and
// Close removes everything it started. With Options.TLS every member also
// serves TLS clients on a secure port, with certificates made at Start
// (SecureAddrs, ClientTLS, TLSFiles). With Options.SASLUsers the server
// gets a JAAS file and accepts SASL DIGEST-MD5 logins of those users;
// StartKDC runs a Kerberos KDC (MIT's, from Debian's krb5-kdc) and
// Options.Kerberos a server that accepts GSSAPI logins of its principals.
//
// For fault injection between one client and one server, Proxy forwards TCP
// connections and can delay, pause, blackhole or cut them, including a
// one-shot trap that cuts a connection right after a chosen ZooKeeper
// request. ExpireSession forces a session to expire on the server. To ask a
// server about itself (four-letter words, the AdminServer, which
// Options.AdminServer turns on), use package
// github.com/zkrecipes/zkrecipes/zkclient/zkadmin.
//
// With the environment variable ZKTEST_SERVER=zkserver, Start runs a
// standalone server in process with the embedded zkserver instead of a JVM
// (ensembles still run ZooKeeper); the default, ZKTEST_SERVER=zookeeper,
// runs the real thing.
//
// The package needs Java and ZooKeeper (3.8 is tested). It looks for the
// Debian package layout (/usr/share/java/zookeeper.jar, installed with
// "apt-get install -y zookeeper") unless ZOOKEEPER_HOME names an unpacked
// release; ZKTEST_JAVA selects the java binary. Available reports what is
// missing.
package zktest
