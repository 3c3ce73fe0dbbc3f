package nemesis

import "sync"

// Register is an in-process fenced register, the resource a lock guards:
// it accepts a write only with a token at least the highest it has
// accepted, so a holder that lost its lock without knowing cannot
// overwrite its successor's work. Every decision is recorded, under the
// register's lock, so the history holds them in the order they were made.
type Register struct {
	h   *History
	res string

	mu      sync.Mutex
	highest int64
	written bool
}

// NewRegister returns the register of resource res, recording to h.
func NewRegister(h *History, res string) *Register { return &Register{h: h, res: res} }

// Write offers a write with token by the holding, and reports whether the
// register accepted it.
func (r *Register) Write(client int, gen int32, holding int32, token int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := !r.written || token >= r.highest
	if ok {
		r.highest, r.written = token, true
	}
	r.h.Record(Event{Kind: KindWrite, Client: client, Gen: gen, Res: r.res, Holding: holding, Token: token, Accepted: ok})
	return ok
}
