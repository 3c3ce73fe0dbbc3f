package nemesis

import (
	"context"
	"sync"

	"github.com/zkrecipes/zkrecipes/fencing"
)

// Register is an in-process fenced register, the resource a lock guards:
// it accepts a write only with a token at least the highest it has
// accepted, so a holder that lost its lock without knowing cannot
// overwrite its successor's work. Every decision is recorded, under the
// register's lock, so the history holds them in the order they were made.
//
// The rule is package fencing's, written once there: the decision is a
// fencing.MemoryStore's. Register adds the recording. It is not a
// fencing.Register (the fenced register in a ZooKeeper node, which `zkr
// demo crash` shows), on purpose: the suite's register stands for the
// user's resource, outside the ensemble under faults, and the checker
// needs every decision known for certain and recorded in the order it was
// made. A node written through the faulted ensemble would leave writes
// failed or in doubt (connection loss) under the very faults injected, and
// its decisions, made by the leader, would be recorded by the clients in
// another order. The checker's register property keeps its own copy of
// the rule: an oracle shares no code with what it checks.
type Register struct {
	h     *History
	res   string
	store fencing.MemoryStore

	mu sync.Mutex // orders decisions and their records alike
}

// NewRegister returns the register of resource res, recording to h.
func NewRegister(h *History, res string) *Register { return &Register{h: h, res: res} }

// Write offers a write with token by the holding, and reports whether the
// register accepted it.
func (r *Register) Write(client int, gen int32, holding int32, token int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	highest, _ := r.store.Advance(context.Background(), r.res, token) // a MemoryStore does not fail
	ok := highest == token
	r.h.Record(Event{Kind: KindWrite, Client: client, Gen: gen, Res: r.res, Holding: holding, Token: token, Accepted: ok})
	return ok
}
