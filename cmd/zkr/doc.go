// Command zkr runs commands under ZooKeeper coordination recipes and shows
// what the recipes do on the wire.
//
//	zkr lock PATH -- COMMAND [ARG...]     run COMMAND while holding the lock on PATH
//	zkr elect PATH --id ID -- COMMAND     run COMMAND only while leader of PATH
//	zkr elect PATH --observe              print the leader of PATH whenever it changes
//	zkr members PATH [--watch]            list (and follow) the members of a group
//	zkr join PATH --id ID [-- COMMAND]    be a member of a group while COMMAND runs
//	zkr register BASE NAME [-- COMMAND]   be a service instance (Curator's discovery) while COMMAND runs
//	zkr services BASE [NAME] [--watch]    list the services, or one's instances (and follow them)
//	zkr inspect PATH                      show the queue of a lock or election
//	zkr demo [SCENARIO]                   zkrecipes against hand-rolled recipes, measured: herd
//	                                      (default), race, crash, watches, election, payload, all
//	zkr bench                             lock throughput and handoff latency
//	zkr server [--addr A] [--tick D]      run the embedded ZooKeeper-compatible server
//
// Every command takes --servers (comma-separated host:port, optionally
// ending in a chroot to which every PATH is relative, as in
// "zk1:2181,zk2:2181/app"; default $ZKR_SERVERS, then 127.0.0.1:2181),
// --session-timeout, --connect-timeout and -v. --tls-ca (server-authenticated
// TLS), --tls-cert with --tls-key (a client certificate), --auth
// user:password (digest), --sasl-user with --sasl-password (SASL
// DIGEST-MD5) and --kerberos-principal (SASL GSSAPI, with
// --kerberos-keytab, --kerberos-password or kinit's cache, and
// --krb5-config) secure the session; $ZKR_TLS_CA, $ZKR_TLS_CERT,
// $ZKR_TLS_KEY, $ZKR_AUTH, $ZKR_SASL_USER, $ZKR_SASL_PASSWORD,
// $ZKR_KERBEROS_PRINCIPAL, $ZKR_KERBEROS_KEYTAB, $ZKR_KERBEROS_PASSWORD and
// $KRB5_CONFIG stand in for them, a flag winning over its variable. They do not apply to a server zkr starts itself (demo and bench
// without --servers). "zkr COMMAND --help" describes each command, with
// examples.
//
// # Exit status
//
// When zkr ran a command (lock, elect, join), it exits with the command's
// own status, or 128+N if the command was killed by signal N, except when
// the lock, leadership or membership was lost while the command ran (5).
// Otherwise:
//
//	0    success
//	1    internal or ZooKeeper error, including credentials refused by the
//	     server or by a node's ACL (--auth, --sasl-user,
//	     --kerberos-principal, --tls-cert) and a missing chroot
//	2    bad input: unknown flag, bad path, bad duration, missing command,
//	     unreadable or invalid TLS or Kerberos file
//	3    --timeout expired before the lock or leadership was obtained
//	4    not obtained without waiting: lock held (--try), member id taken
//	5    lock, leadership or membership lost while the command ran; the
//	     command was stopped (SIGTERM, then SIGKILL after --grace)
//	6    could not connect to ZooKeeper, a failed TLS handshake included
//	     (or start one, for demo and bench)
//	126  the command could not be executed
//	127  the command was not found
//	128+N  zkr was stopped by signal N before the command started
//
// # The command's process
//
// The command gets ZKR_FENCING_TOKEN (the holder's fencing token, a
// decimal number that strictly increases from one holder to the next) and
// ZKR_PATH; under elect and join also ZKR_ID. Signals sent to zkr (INT,
// TERM, HUP, QUIT, USR1, USR2) are forwarded to it. When zkr's standard
// input is not a terminal, the command runs in a process group of its own
// and signals go to that whole group; on a terminal it stays in the
// terminal's group, which delivers Ctrl-C to it directly. On Linux the
// command's process is killed if zkr itself dies (processes the command
// started are not), since the lock would then be released when the server
// expires zkr's session.
//
// zkr lock, elect and join use a strict session: the holding counts as lost
// as soon as the connection to ZooKeeper has been down for half the
// session timeout, before the server could have expired the session and
// granted the lock to someone else.
package main
