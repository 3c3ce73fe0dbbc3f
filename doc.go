// Package zkrecipes implements ZooKeeper coordination recipes for Go: the
// locks [Mutex], [RWMutex], [MultiLock] and [Semaphore]; leader [Election];
// group membership ([JoinGroup]); [Barrier] and [DoubleBarrier];
// [CreatePersistentNode]; the counters [SharedCount] and [AtomicLong]; the
// work queues [Queue] and [LockingQueue]; service [Discovery]; and a [Cache]
// of a subtree. Each uses the node layout of its Apache Curator (or kazoo)
// counterpart, so Go and Java (or Python) processes can share a path, and
// each tells its users, truthfully, when what they hold is gone.
//
// Start with [NewSession], then a recipe:
//
//	s, err := zkrecipes.NewSession(ctx, servers, zkrecipes.WithStrict())
//	m := zkrecipes.NewMutex(s, "/app/locks/report")
//	err = m.Lock(ctx) // then watch m.Lost() and pass m.Token() on
//
// The package's examples show each recipe; most of them run as they are,
// against an embedded server from package
// [github.com/zkrecipes/zkrecipes/zkserver].
//
// # Sessions
//
// A [Session] is one ZooKeeper session. Ephemeral nodes, and so every lock a
// process holds, live exactly as long as it: when the process dies or is
// cut off for longer than the session timeout, the server expires the
// session and deletes its nodes. That is the only release a dead process
// can give. A Session never carries on with a new session behind its
// users' backs; once it is over, [Session.Done] is closed and every call
// returns an error that wraps [ErrSessionExpired] (or [ErrSessionClosed]).
// [Session.States] streams what to believe meanwhile (suspended, lost,
// reconnected, expired, closed).
//
// # Two layers: the client and the Session
//
// The Session runs on the project's own client, package
// [github.com/zkrecipes/zkrecipes/zkclient], which [Session.Client] gives to
// code that needs more. The rule between them:
//
//   - [zkclient.Client] is the raw protocol: one request, one answer, no
//     retries; a session expiry ends it.
//   - [Session] is the framework around one session: its life and loss,
//     the recipes, the chroot (a client option), the retry of idempotent
//     reads across connection loss, parents made on request, a default ACL.
//
// Where both offer an operation it has the same name and the same shape:
// [Session.Create], [Session.CreateTTL], [Session.Get], [Session.GetW],
// [Session.Set], [Session.Delete], [Session.Exists], [Session.ExistsW],
// [Session.Children], [Session.ChildrenW], [Session.GetACL],
// [Session.SetACL], [Session.Sync], [Session.Multi] and [Session.AddWatch]
// take the client's parameters and return its results. What the Session
// adds is said in each one's doc, and is only this: reads (and AddWatch)
// are sent again after a connection loss while ctx allows and the session
// lives; children are sorted; a nil ACL is the Session's ([WithACL]); the
// creates, deletes, listings and reads are counted in [Session.Stats].
// Writes are never sent again: an answer lost with the connection leaves
// the write's outcome unknown. The Session alone has
// [Session.CreateParents] and [Session.DeleteTree], which ZooKeeper has no
// request for. The Session's options are those it acts on itself
// ([WithLogger], [WithACL], [WithStrict], [WithStrictMargin]); the
// client's, such as the session timeout, credentials, TLS or a chroot, are
// passed through [WithClientOptions].
//
// # The line of contenders
//
// The locks and the election are one algorithm with different rules for
// who waits for whom. Each contender creates an ephemeral sequential node
// under the recipe's path. The lowest sequence number holds; every other
// contender watches only the nearest node that blocks it, with a call that
// sets the watch and fails if the node is already gone, so nothing is
// missed between listing the line and watching. One release wakes exactly
// one waiter, however long the line. Node names follow Apache Curator's
// layout ("_c_<uuid>-lock-<seq>"), so Go and Java processes can share a
// lock.
//
// # Loss and fencing
//
// A holder can lose its lock without releasing it: its session may expire
// while it is paused or partitioned. [Mutex.Lost] reports that, at session
// expiry for sure, when someone deletes the holder's node, and, with
// [WithStrict], as soon as half the session timeout has passed since the
// send time of the newest request the server answered, before expiry is
// possible, provided the holder's process runs: a process that is frozen
// (a long pause, a suspended machine) is told only once it runs again,
// possibly after another holder was granted the lock (see [WithStrict]).
// Because a holder may still act before it notices, [Mutex.Token] gives a
// fencing token: a number that strictly increases from one holder to the
// next. Send it with every write to the guarded resource, and have
// the resource reject writes carrying a token lower than the highest it has
// accepted. [Mutex.HeldOp] makes a write in [Session.Multi] conditional on
// still holding.
//
// # Watching
//
// Everything that follows a state on ZooKeeper is read the same way: a
// value whose Next(ctx) returns the next update and, once it has ended,
// at every call, why (the session expired or was closed, a server error,
// or [ErrStreamClosed] after its own Close), and whose Close ends it.
// [Election.Observe], [WatchGroup], [Discovery.Watch] and
// [SharedCount.Watch] return a [Stream], which holds the latest state
// only: a slow reader never works through a backlog. [Cache] and
// [Session.States] queue every event instead, none dropped. A bad
// argument is an error at the call that starts the stream.
//
//	leaders, err := election.Observe(ctx) // err: a bad path, or the first read failed
//	...
//	defer leaders.Close()
//	for {
//		leader, err := leaders.Next(ctx) // "" when nobody leads
//		...
//	}
//
// Every promise, with the test that holds it, is listed in the repository's
// docs/guarantees.md.
package zkrecipes
