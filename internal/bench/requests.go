package bench

import (
	"context"
	"fmt"
	"strconv"

	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// Requests is what servers' own counters say they answered: Reads are the
// requests that make no transaction (reads, watches set, pings), Writes
// those that do (creates, deletes, multis, failed ones too, and sessions'
// starts and ends).
type Requests struct {
	Reads, Writes int64
}

// ServerRequests returns a Config.Requests that asks each of servers
// (client ports) "mntr" and adds up their zk_cnt_readlatency and
// zk_cnt_updatelatency: ZooKeeper counts a request there once, on the
// server its client is connected to, when it answers it. It needs mntr in
// 4lw.commands.whitelist, and ZooKeeper 3.6 or later (zkserver does not
// report these counters).
func ServerRequests(servers []string) func(context.Context) (Requests, error) {
	return func(ctx context.Context) (Requests, error) {
		var sum Requests
		for _, addr := range servers {
			m, err := zkadmin.Mntr(ctx, addr)
			if err != nil {
				return Requests{}, err
			}
			reads, err := counter(m, addr, "zk_cnt_readlatency")
			if err != nil {
				return Requests{}, err
			}
			writes, err := counter(m, addr, "zk_cnt_updatelatency")
			if err != nil {
				return Requests{}, err
			}
			sum.Reads += reads
			sum.Writes += writes
		}
		return sum, nil
	}
}

// counter is the integer mntr reported under key.
func counter(m map[string]string, addr, key string) (int64, error) {
	v, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("bench: %s's mntr has no %s (ZooKeeper 3.6 or later reports it)", addr, key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: %s's mntr: %s: %w", addr, key, err)
	}
	return n, nil
}

// meter adds up what Config.Requests counts over a run's timed parts,
// each between a start and a stop. Without Config.Requests, or after any
// error reading it, the run's figures are unknown.
type meter struct {
	read      func(context.Context) (Requests, error)
	sum, mark Requests
	failed    bool
}

// newMeter returns the meter of a run with cfg: one that counts nothing
// without cfg.Requests.
func newMeter(cfg Config) *meter {
	return &meter{read: cfg.Requests, failed: cfg.Requests == nil}
}

// start marks the beginning of a timed part, and stop its end: each reads
// the counters once (with ServerRequests, one mntr to each server in
// turn), outside the part's time.
func (m *meter) start(ctx context.Context) {
	if m.failed {
		return
	}
	r, err := m.read(ctx)
	m.mark, m.failed = r, err != nil
}

func (m *meter) stop(ctx context.Context) {
	if m.failed {
		return
	}
	r, err := m.read(ctx)
	m.sum.Reads += r.Reads - m.mark.Reads
	m.sum.Writes += r.Writes - m.mark.Writes
	m.failed = err != nil
}

// per returns the reads and writes counted per n acquisitions, or -1 each
// when they are not known.
func (m *meter) per(n float64) (reads, writes float64) {
	if m.failed {
		return -1, -1
	}
	return float64(m.sum.Reads) / n, float64(m.sum.Writes) / n
}
