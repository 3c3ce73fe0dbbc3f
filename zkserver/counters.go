package zkserver

import (
	"maps"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// counters are the server's statistics, guarded by Server.mu.
type counters struct {
	requests map[int32]int64
	events   int64
}

func newCounters() counters { return counters{requests: map[int32]int64{}} }

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

// opName returns ZooKeeper's short name of an opcode, as cons shows it.
func opName(op int32) string {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		return "CREA"
	case jute.OpDelete:
		return "DELE"
	case jute.OpExists:
		return "EXIS"
	case jute.OpGetData:
		return "GETD"
	case jute.OpSetData:
		return "SETD"
	case jute.OpGetACL:
		return "GETA"
	case jute.OpSetACL:
		return "SETA"
	case jute.OpGetChildren, jute.OpGetChildren2:
		return "GETC"
	case jute.OpSync:
		return "SYNC"
	case jute.OpPing:
		return "PING"
	case jute.OpMulti:
		return "MULT"
	case jute.OpMultiRead:
		return "MLTR"
	case jute.OpCloseSession:
		return "CLOS"
	case jute.OpSetWatches, jute.OpSetWatches2:
		return "SETW"
	}
	return "NA"
}
