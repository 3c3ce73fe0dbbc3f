// Package zkrecipes implements ZooKeeper coordination recipes for Go — Mutex,
// RWMutex, MultiLock, Election, Group membership, Semaphore, Barrier,
// DoubleBarrier and PersistentNode; SharedCount and AtomicLong; the work
// queues Queue and LockingQueue; service Discovery; a Cache of a subtree —
// on top of a Session that tells its users, truthfully, when what they
// hold is gone, and that reads and writes the caller's own nodes too. The
// locks and the election are one algorithm, the contender queue, with
// different rules for who waits for whom. Each recipe uses the node layout
// of its Apache Curator (or kazoo) counterpart, so Go and Java (or Python)
// processes can share it.
//
// # Sessions
//
// A Session is one ZooKeeper session. Ephemeral nodes, and so every lock a
// process holds, live exactly as long as it: when the process dies or is
// cut off for longer than the session timeout, the server expires the
// session and deletes its nodes. That is the only release a dead process
// can give. A Session never carries on with a new session behind its
// users' backs; once it is over, Done is closed and every call returns an
// error that wraps ErrSessionExpired (or ErrSessionClosed). It runs on the
// package zkclient, the project's own ZooKeeper client; Session.Client
// gives it to code that reads and writes nodes of its own.
//
// # The contender queue
//
// Each contender creates an ephemeral sequential node under the recipe's
// path. The lowest sequence number holds; every other contender watches
// only the nearest node that blocks it, with a call that sets the watch and
// fails if the node is already gone, so nothing is missed between listing
// the queue and watching. One release wakes exactly one waiter, however
// long the queue. Node names follow Apache Curator's layout
// ("_c_<uuid>-lock-<seq>"), so Go and Java processes can share a lock.
//
// # Loss and fencing
//
// A holder can lose its lock without releasing it: its session may expire
// while it is paused or partitioned. Mutex.Lost reports that, at session
// expiry for sure and, with WithStrict, as soon as half the session
// timeout has passed since the send time of the newest request the server
// answered, before expiry is possible, provided the holder's process runs:
// a process that is frozen (a long pause, a suspended machine) is told
// only once it runs again, possibly after another holder was granted the
// lock. Because a holder may still act before it notices, Mutex.Token
// gives a fencing token: a number that strictly increases from one holder
// to the next. Send it with every write to the guarded resource, and have
// the resource reject writes carrying a token lower than the highest it
// has accepted.
package zkrecipes
