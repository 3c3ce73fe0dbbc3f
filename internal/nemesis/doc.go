// Package nemesis is a randomized fault suite for the recipes: a runner
// that drives several client sessions, each behind its own fault-injecting
// proxies (one per member), against a real ZooKeeper ensemble while a
// seeded scheduler breaks things, and a checker that judges the recorded
// history afterwards.
//
// The parts:
//
//   - History records every event of a run (faults, sessions, grants,
//     releases, noticed losses, fenced writes, errors, leftover nodes) with
//     a timestamp from one monotonic clock: all clients live in one
//     process, so their events are ordered on one time line.
//   - NewPlan draws the faults from a seed with math/rand/v2, before the
//     run: the same seed gives the same fault choices (kinds, targets,
//     durations, gaps). Targets that only exist at run time (the leader,
//     the member a lock holder is connected to) are resolved then, without
//     drawing from the generator.
//   - Run executes the plan on a zktest.Cluster while the workloads (Mutex
//     with TryLock and Requeue, MultiLock with TryLock on path sets shared
//     with plain Mutexes, RWMutex, Election, Semaphore with TryAcquire; a
//     writer churning a subtree that a Cache follows; PersistentNodes with
//     session renewal, changed and deleted by another client; AtomicLong
//     and SharedCount increments; Queue and LockingQueue producers and
//     consumers) run, heals everything after the last fault, waits for
//     every workload to acquire again, for the Cache to match the server,
//     the PersistentNodes to be back and the queues to be drained, reads
//     the counters, closes the sessions and looks for nodes left behind. Each
//     client is one Session, replaced by a new one when the server expired
//     it (the recipes never reuse an expired session), or when a release
//     could not be confirmed (ErrReleaseUnconfirmed: the node stays while
//     the session lives, so it is closed, as documented). A lock-like
//     recipe joins by a workload kind in layout and a case in
//     runner.recipe that turns its acquire and release into a grant (a
//     MultiLock's grant is one holding per path); a recipe that keeps data
//     records its writes and what it reports, as the cache writer and
//     follower and the PersistentNode keeper do, for a check of its own.
//   - Check is a pure function of the history: it knows nothing of
//     ZooKeeper, so it is unit-tested with hand-made histories that break
//     each property.
//
// The properties Check verifies:
//
//   - Exclusion. A holding lasts from its grant (the return of Lock,
//     Campaign, Acquire) to the start of its release, or to the moment the
//     holder noticed Lost closed if that came first: the workload stops
//     using the resource then. Two holdings of one resource that conflict
//     (two exclusive ones, an exclusive one and a shared one, more than n
//     permits of an n-permit semaphore) must not overlap. The only excuse
//     is a session the server ended without the holder knowing, one that
//     ended expired: the nemesis set out to expire it on purpose at or
//     before the other's grant (counted as "forced"), or, for a session
//     without strict mode, the other was granted at least its timeout (less
//     ExpirySlack) after the newest answered send of that session, which
//     is the earliest the server can have expired it (counted as
//     "expired"). A strict session has no such excuse: its Lost must close
//     before the server may expire it. A holding whose Lost was already
//     closed when the call returned is empty: it never used the resource.
//   - Tokens. Fencing tokens strictly increase in grant order between
//     holdings that exclude each other: an exclusive holding's token is
//     above every earlier holding's, a shared one's above every earlier
//     exclusive one's; shared holdings may share a token. The same excuses
//     apply.
//   - Register. Each fenced register accepts a write only with a token at
//     least the highest it accepted; the recorded decisions must be exactly
//     that, and every write must fall inside its holding.
//   - Progress. After the last fault healed, every workload acquires again
//     within ProgressBound (a MultiLock workload by a grant of its own, not
//     a plain Mutex's on one of its paths).
//   - Leftovers. Once every session is closed, no node but containers is
//     left under the recipes' paths.
//   - Orphans. While a session lives, a call that failed (a TryLock that
//     found the lock taken included) has left none of its nodes, as the
//     recipes promise: after such a failure the workload asks the server
//     for the session's ephemeral nodes under the path.
//   - Errors. Every error a recipe call returned is one of the kinds a fault
//     may cause (Classify, Allowed); anything else is a violation.
//   - Cache. Each Cache's event stream, replayed on an empty tree, keeps
//     the model the Cache documents: the initial load reports creations
//     only, then CacheInitialized once; the copy stays a tree; per node
//     versions only move forward and no state (Czxid, Mzxid) is reported
//     twice; every state reported is one a write of the writer made (its
//     data is unique to the write, and an acknowledged write's Stat is
//     known; a write the server refused never shows); and at every
//     snapshot of the copy (when the Cache stopped, and the final one) the
//     replay is exactly the copy. See cacheCheck.
//   - Convergence. Once the writer stopped after the heal, the Cache's copy
//     equals the server's tree (the same nodes, data, Czxid, Mzxid and
//     Version) within ProgressBound.
//   - PersistentNode. Within ProgressBound of the heal each node exists, is
//     owned by one of the sessions its PersistentNode was kept on, and
//     holds the data of its last acknowledged creation or SetData, or of a
//     later one that failed (NodeVerdict).
//   - Counters. Each acknowledged increment (positive, from 0) returned
//     the value it wrote and owns the range (value-delta, value] alone,
//     and the value after the heal is the acknowledged sum plus that of
//     some of the unconfirmed ones (ErrWriteUnconfirmed), each once, the
//     rest of the count in each gap between acknowledged ranges too: no
//     acknowledged increment lost, none applied twice (counterCheck).
//   - Queues. Every item's data is unique. Nothing is taken (Queue) or
//     consumed (LockingQueue) that no Offer offered (a failed Offer adds
//     nothing), nothing twice; every acknowledged offer is taken or
//     consumed by the end of the drain after the heal, and nothing is
//     left (queueCheck). A LockingQueue item's take is a holding of
//     "lqueue/<item>" with one permit, so the exclusion check finds two
//     consumers on one item at once (unless the first saw Lost close), and
//     after a failed take or consume the orphan check finds a lock its
//     session kept.
//   - Supervised election. Three strict clients also run RunWhileLeader
//     on sessions of its own (supervised.go); each run of its work is a
//     holding from its start to the moment it notices its context
//     cancelled, so Exclusion finds work still running after the
//     leadership could have passed to another, and Tokens and Register
//     apply to its token. Twice: one supervisor never starts its work
//     before the previous run returned.
//
// On a violation, Timeline shows the events around it.
package nemesis
