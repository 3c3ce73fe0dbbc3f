package zkserver

import (
	"maps"
	"math"
)

// counters are the server's statistics, guarded by Server.mu.
type counters struct {
	requests map[int32]int64
	events   int64
}

func newCounters() counters { return counters{requests: map[int32]int64{}} }

// serverStats are the figures srvr, stat and mntr report, which srst
// resets. Guarded by Server.mu.
type serverStats struct {
	received   int64 // packets received: requests, handshakes, commands
	sent       int64 // packets sent: replies and notifications
	authFailed int64
	lat        latency
}

// latency accumulates request latencies in milliseconds, as ZooKeeper's
// min/avg/max figures.
type latency struct {
	count, total, min, max, last int64
}

func (l *latency) add(ms int64) {
	if l.count == 0 || ms < l.min {
		l.min = ms
	}
	l.max = max(l.max, ms)
	l.count++
	l.total += ms
	l.last = ms
}

func (l *latency) minimum() int64 {
	if l.count == 0 {
		return 0
	}
	return l.min
}

// avg returns the mean rounded to 4 decimals, as ZooKeeper prints it.
func (l *latency) avg() float64 {
	if l.count == 0 {
		return 0
	}
	return math.Round(float64(l.total)/float64(l.count)*1e4) / 1e4
}

// Stats is a snapshot of a server's counters.
type Stats struct {
	Requests       map[int32]int64 // requests received, by opcode
	WatchEvents    int64           // watch notifications sent
	Sessions       int             // live sessions
	Connections    int             // open client connections
	Watches        int             // watches set (path, connection, kind)
	Nodes          int             // znodes, the system nodes included
	Zxid           int64           // last zxid
	EphemeralNodes int             // ephemeral znodes
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Requests:       maps.Clone(s.counters.requests),
		WatchEvents:    s.counters.events,
		Sessions:       len(s.sessions),
		Connections:    len(s.conns),
		Watches:        s.watches.count(),
		Nodes:          len(s.tree.nodes),
		Zxid:           s.zxid,
		EphemeralNodes: s.tree.countEphemerals(),
	}
}
