// Package zkclient is a ZooKeeper client: one session kept alive across
// connections to the members of an ensemble, with every call taking a
// context, requests pipelined in order on one connection, one-shot and
// persistent watches that never drop an event, and the session's life
// reported as a stream of states. The zkrecipes package runs on it; use it
// alone for reads and writes of your own.
//
//	c, err := zkclient.Connect(ctx, []string{"zk1:2181,zk2:2181/app"}, zkclient.WithSessionTimeout(10*time.Second))
//	data, stat, err := c.Get(ctx, "/config")
//	_, err = c.Set(ctx, "/config", v, stat.Version) // errors.Is(err, zkclient.ErrBadVersion)
//
// [Connect] opens a [Client]. The examples show a session's basic calls,
// pipelining with [Client.ChildrenAsync], a persistent recursive watch with
// [Client.AddWatch], the state stream of [Client.States] and a SASL login
// with [WithSASL]; they run against an embedded server.
//
// A blocking call whose context has already ended returns the context's
// error and sends nothing, so its outcome is known: nothing was done. The
// Remove methods of watches are the exception: they always send the
// removal, and wait for its answer only while ctx allows.
//
// It speaks ZooKeeper 3.5 to 3.9's wire protocol: TLS ([WithTLS], for
// secureClientPort), digest and other auth schemes, SASL ([WithSASL]:
// [DigestMD5] as ZooKeeper's JAAS configuration serves it, Kerberos GSSAPI
// with the module github.com/zkrecipes/zkrecipes/zkclient/kerberos), chroot,
// setWatches2 after a reconnection, addWatch and removeWatches, multi and
// multiRead, TTL and container nodes.
//
// Timing follows ZooKeeper's own Java client: with a negotiated session
// timeout T, the client pings when it has sent nothing for T/3, drops a
// connection on which nothing was heard for 2T/3 and tries the next
// server, giving each server T/n to answer (n servers). A reconnection
// resumes the session with its id and password and the newest zxid seen,
// so a server that is behind refuses it and the client never sees the
// tree go back in time. After the server expired the session, the Client
// is over: it never opens a new session behind the caller's back.
//
// For code that must stop touching a resource before the server could
// have expired the session (a lock holder), [Client.Confirmed] gives the
// send time of the newest answered request: the session lives at least
// until then plus T.
package zkclient
