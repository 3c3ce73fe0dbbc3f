package zkserver

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// version is what srvr, stat and mntr report.
const version = "3.8.0-zkserver"

func isFourLetter(cmd string) bool {
	switch cmd {
	case "ruok", "srvr", "stat", "mntr", "cons", "wchs", "envi", "conf", "isro", "dirs", "crst", "srst", "wchc", "wchp", "dump", "gtmk", "stmk":
		return true
	}
	return false
}

// fourLetter answers a four-letter word in ZooKeeper's format.
func (s *Server) fourLetter(cmd string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch cmd {
	case "ruok":
		return "imok"
	case "srvr":
		return s.srvr(false)
	case "stat":
		return s.srvr(true)
	case "mntr":
		return s.mntr()
	case "cons":
		return s.cons(true) + "\n"
	case "wchs":
		paths := map[string]bool{}
		conns := map[*conn]bool{}
		for _, t := range []watchTable{s.watches.data, s.watches.child} {
			for p, set := range t {
				paths[p] = true
				for c := range set {
					conns[c] = true
				}
			}
		}
		return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n",
			len(conns), len(paths), s.watches.count())
	case "isro":
		return "rw"
	}
	return cmd + " is not executed because it is not supported by zkserver.\n"
}

func (s *Server) srvr(clients bool) string {
	var b strings.Builder
	var recv, sent int64
	for c := range s.conns {
		recv += c.recv
		sent += c.sent
	}
	fmt.Fprintf(&b, "Zookeeper version: %s\n", version)
	if clients {
		b.WriteString("Clients:\n")
		b.WriteString(s.cons(false))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Latency min/avg/max: 0/0.0/0\n")
	fmt.Fprintf(&b, "Received: %d\n", recv)
	fmt.Fprintf(&b, "Sent: %d\n", sent)
	fmt.Fprintf(&b, "Connections: %d\n", len(s.conns))
	fmt.Fprintf(&b, "Outstanding: 0\n")
	fmt.Fprintf(&b, "Zxid: 0x%x\n", s.zxid)
	fmt.Fprintf(&b, "Mode: standalone\n")
	fmt.Fprintf(&b, "Node count: %d\n", len(s.tree.nodes))
	return b.String()
}

// cons lists the connections, one line each, in ZooKeeper's format.
func (s *Server) cons(full bool) string {
	var lines []string
	for c := range s.conns {
		if !full {
			lines = append(lines, fmt.Sprintf(" %s[1](queued=0,recved=%d,sent=%d)\n", slashAddr(c), c.recv, c.sent))
			continue
		}
		var sid int64
		var to time.Duration
		if c.sess != nil {
			sid, to = c.sess.id, c.sess.timeout
		}
		lines = append(lines, fmt.Sprintf(" %s[1](queued=0,recved=%d,sent=%d,sid=0x%x,lop=%s,est=%d,to=%d,lcxid=0x%x,lzxid=0x%x,lresp=%d,llat=0,minlat=0,avglat=0,maxlat=0)\n",
			slashAddr(c), c.recv, c.sent, sid, orNA(c.lastOp), c.est.UnixMilli(), to.Milliseconds(), c.lastCxid, c.lastZxid, time.Now().UnixMilli()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

func slashAddr(c *conn) string { return "/" + c.nc.RemoteAddr().String() }

func orNA(s string) string {
	if s == "" {
		return "NA"
	}
	return s
}

func (s *Server) mntr() string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "zk_%s\t%v\n", k, v) }
	var recv, sent int64
	for c := range s.conns {
		recv += c.recv
		sent += c.sent
	}
	line("version", version)
	line("server_state", "standalone")
	line("avg_latency", 0)
	line("max_latency", 0)
	line("min_latency", 0)
	line("packets_received", recv)
	line("packets_sent", sent)
	line("num_alive_connections", len(s.conns))
	line("outstanding_requests", 0)
	line("znode_count", len(s.tree.nodes))
	line("watch_count", s.watches.count())
	line("ephemerals_count", s.tree.countEphemerals())
	line("approximate_data_size", s.tree.dataSize())
	line("global_sessions", len(s.sessions))
	line("uptime", time.Since(s.started).Milliseconds())
	return b.String()
}
