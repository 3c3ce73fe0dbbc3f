// Package fencing enforces a lock's fencing token where the lock holder's
// writes land: in a SQL database, behind an HTTP server, in a ZooKeeper
// node.
//
// A lock cannot stop a holder that paused (a long garbage collection, a
// stalled virtual machine, a slow link) from writing after its session
// expired and a successor took the lock. What can stop it is the resource
// itself: every holding has a token (zkrecipes.Mutex.Token,
// zkrecipes.Election.Token, zkrecipes.RWMutex.Token,
// zkrecipes.MultiLock.Token) that strictly increases from one holder to
// the next, the holder sends it with each write, and the resource refuses a
// write whose token is lower than the highest it has accepted for the same
// resource name. The late writer's token is lower than its successor's, so
// its write is refused, with a [*StaleError].
//
// A token equal to the highest accepted is accepted: one holding writes
// many times with the same token. A token is positive; 0, what Token
// returns when nothing is held, is refused with [ErrNoToken].
//
// The adapters, with nothing but the standard library and this module's
// zkclient (the database driver is the caller's):
//
//   - [Table] makes writes to a SQL database (PostgreSQL, SQLite) conditional
//     on the token: [Table.Fence] records it in a fence table in the same
//     transaction as the write, or refuses it; [Table.Write] runs a whole
//     transaction that way.
//   - [Transport] sends the token with every HTTP request, and [Guard] is the
//     server's middleware that refuses a request whose token is lower than
//     the highest it has seen for that resource (kept by a [Store]: in memory,
//     in the SQL table, or in ZooKeeper with [ZooKeeperStore], shared by
//     several replicas) with 409 Conflict; [CheckResponse] turns that answer
//     back into a [*StaleError].
//   - [Register] is a fenced value in a ZooKeeper node.
//
// Writes to ZooKeeper made with the same session as the lock can instead be
// made conditional on still holding it: zkrecipes.Mutex.HeldOp in a
// zkrecipes.Session.Multi. The repository's docs/fencing.md walks
// through each pattern.
package fencing
