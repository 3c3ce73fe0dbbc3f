// Package zkserver is an embedded, single-node server that speaks the
// Apache ZooKeeper 3.8 client protocol, for tests, demos and local
// development, in the spirit of alicebob/miniredis: code under test
// connects to it with any ZooKeeper client, and the test controls the
// server directly.
//
//	s := zkserver.RunT(t)          // closed when the test ends
//	c, err := zkclient.Connect(ctx, []string{s.Addr()})
//
// [Run] (or [RunT] inside a test) starts a [Server] on a free loopback
// port; [NewServer] with [Options] configures one first. The package's
// example runs a server and talks to it.
//
// It implements sessions (negotiation, expiry, reconnection), the data
// tree (persistent, ephemeral, sequential, container and TTL nodes, null
// data apart from empty data), ACLs (world, digest, ip, auth, x509 for
// clients of the TLS port, [Options].TLS, and sasl for sessions that logged
// in with SASL DIGEST-MD5, [Options].SASLUsers), one-shot and persistent
// watches, multi, the four-letter words in ZooKeeper's formats (srvr,
// stat, cons, mntr, envi, conf, dump, wchs, wchc, wchp, isro, dirs, ...),
// and controls a test needs: [Server.ExpireSession],
// [Server.DropConnections], [Server.Restart], direct tree access and
// counters. It keeps its state in memory, or, with [Options].DataDir, also
// in a transaction log and snapshots that a new server on the same
// directory loads; a log or snapshot that cannot be written stops the
// server ([Server.Err], [Server.Failed]). It is trusted as far as the
// conformance suite, run against both zkserver and a real ZooKeeper 3.8,
// shows. It has no Kerberos. It is no replacement for an ensemble.
package zkserver
