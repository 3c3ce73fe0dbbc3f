// Package sqltest tests package fencing with real databases and real
// ZooKeeper: PostgreSQL (Debian's postgresql, started by the tests as an
// unprivileged user on a free loopback port), SQLite (modernc.org/sqlite,
// pure Go), and the crash scenario end to end, a lock holder that pauses
// past its session timeout and writes after its successor. The drivers are
// kept out of the library's module by living in this one.
package sqltest
