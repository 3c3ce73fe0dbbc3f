// Command zkr runs commands under ZooKeeper coordination recipes and shows
// what the recipes do on the wire: it runs a command while holding a lock,
// only while leader, or as a member of a group or a registered service
// instance; it lists groups and services, shows the queue behind a lock or
// an election, follows a subtree's changes, reads and writes nodes, shows and
// changes the ensemble's membership (zkr config, zkr reconfig), runs the
// embedded ZooKeeper-compatible server, measures the recipes against
// hand-rolled ones (zkr demo) and a lock's throughput and handoff time
// beside the least a handoff can cost on a server (zkr bench), and says
// which version it is (zkr version).
//
// Install it with
//
//	go install github.com/zkrecipes/zkrecipes/cmd/zkr@latest
//
// (once v0.1.0 is tagged; until then, go build ./cmd/zkr in a checkout).
// The manual is the command itself: "zkr --help" describes the options
// every command shares, the command's process (its environment, signals)
// and the exit status table; "zkr COMMAND --help" describes each command,
// with examples. docs/cli.md in the repository is that help, every
// command's, generated from the command tree by the tests.
//
// For example, a command run under a lock gets its fencing token in
// ZKR_FENCING_TOKEN, and zkr exits with the command's own status, or with
// exit status 5 (lock, leadership or membership lost while the command ran)
// when the strict session says the lock may be gone.
package main
