package zkserver

import "time"

// Metric is one figure of a server's monitoring snapshot, named as
// ZooKeeper 3.8 names it: in the answer to mntr (after "zk_") and in the
// metrics of its Prometheus metrics provider, which exports every one of
// these as a gauge (packets_received and packets_sent included: srst
// resets them).
type Metric struct {
	Name  string  // ZooKeeper's name, such as "znode_count"
	Help  string  // what it measures, for a metrics exporter's help text
	Value float64 // its value when the snapshot was taken
}

// Metrics returns a snapshot of the server's monitoring figures: the
// numbers mntr reports, read together under the server's lock, in mntr's
// order. It costs one pass over the tree (for ephemerals_count and
// approximate_data_size), as mntr does, and allocates the slice; a
// Prometheus exporter calls it once per scrape
// (github.com/zkrecipes/zkrecipes/metrics/prometheus's NewServerCollector).
//
// Latencies are in milliseconds, as ZooKeeper reports them. The figures
// ZooKeeper has and zkserver does not (open_file_descriptor_count,
// client response sizes, ...) are left out rather than reported as zero,
// except outstanding_requests and local_sessions, which are zero for a
// standalone zkserver as for a standalone ZooKeeper.
func (s *Server) Metrics() []Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrics()
}

// metrics returns the figures of Metrics; s.mu must be held.
func (s *Server) metrics() []Metric {
	return []Metric{
		{"ephemerals_count", "Ephemeral znodes.", float64(s.tree.countEphemerals())},
		{"num_alive_connections", "Open client connections.", float64(len(s.conns))},
		{"avg_latency", "Mean request latency in milliseconds since the start or the last srst.", s.stats.lat.avg()},
		{"outstanding_requests", "Requests received and not yet answered (always 0: zkserver answers each before reading the next).", 0},
		{"znode_count", "Znodes, the system nodes (/zookeeper, ...) included.", float64(len(s.tree.nodes))},
		{"global_sessions", "Live sessions.", float64(len(s.sessions))},
		{"local_sessions", "Local sessions (always 0: zkserver has none).", 0},
		{"packets_sent", "Packets sent (replies and watch notifications) since the start or the last srst.", float64(s.stats.sent)},
		{"packets_received", "Packets received (requests, handshakes, commands) since the start or the last srst.", float64(s.stats.received)},
		{"watch_count", "Watches set: one per path, connection and kind (data, child, persistent).", float64(s.watches.count())},
		{"auth_failed_count", "Failed authentications since the start or the last srst.", float64(s.stats.authFailed)},
		{"min_latency", "Lowest request latency in milliseconds since the start or the last srst.", float64(s.stats.lat.minimum())},
		{"approximate_data_size", "Bytes of znode data and paths.", float64(s.tree.dataSize())},
		{"uptime", "Milliseconds since the server started.", float64(time.Since(s.started).Milliseconds())},
		{"max_latency", "Highest request latency in milliseconds since the start or the last srst.", float64(s.stats.lat.max)},
	}
}
