// Package zkclient is a ZooKeeper client: one session kept alive across
// connections to the members of an ensemble, with every call taking a
// context, requests pipelined in order on one connection, one-shot and
// persistent watches that never drop an event, and the session's life
// reported as a stream of states. A blocking call whose context has
// already ended returns the context's error and sends nothing, so its
// outcome is known: nothing was done. The Remove methods of watches are the
// exception: they always send the removal, and wait for its answer only
// while ctx allows.
//
// It speaks ZooKeeper 3.5 to 3.9's wire protocol (internal/jute): TLS
// (secureClientPort), digest and other auth schemes, SASL (WithSASL:
// DIGEST-MD5 as ZooKeeper's JAAS configuration serves it, Kerberos GSSAPI
// with the kerberos package), chroot, setWatches2
// after a reconnection, addWatch and removeWatches, multi and multiRead,
// TTL and container nodes.
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
// have expired the session (a lock holder), Confirmed gives the send time
// of the newest answered request: the session lives at least until then
// plus T.
package zkclient
