package zkserver

import (
	"fmt"
	"maps"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// version is the server version the four-letter words report, in the
// form of ZooKeeper 3.8.0's Version.getFullVersion(): the release, a dash
// and the build's commit id (here "zkserver"), then the build date as
// ZooKeeper 3.7 and later print it (the 3.8.0 release's). kazoo's
// server_version reads (3, 8, 0) from it.
const (
	version     = "3.8.0-zkserver"
	fullVersion = version + ", built on 2022-02-25 08:49 UTC"
)

// sessionlessTimeout is how long ZooKeeper's NIO connection factory keeps
// a connection that has no session (zookeeper.nio.sessionlessCnxnTimeout,
// default 10s); dump groups connections by it.
const sessionlessTimeout = 10 * time.Second

func isFourLetter(cmd string) bool {
	switch cmd {
	case "ruok", "srvr", "stat", "mntr", "cons", "wchs", "envi", "conf", "isro", "dirs", "crst", "srst", "wchc", "wchp", "dump", "gtmk", "stmk":
		return true
	}
	return false
}

// fourLetter answers a four-letter word, asked on connection c, in
// ZooKeeper 3.8's format (with 4lw.commands.whitelist=*).
func (s *Server) fourLetter(c *conn, cmd string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.countRecv() // ZooKeeper counts the command as a packet received
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
		conns, paths, total := s.watches.summary()
		return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", conns, paths, total)
	case "wchc":
		return s.wchc() + "\n"
	case "wchp":
		return s.wchp() + "\n"
	case "envi":
		return environment()
	case "conf":
		return s.conf()
	case "dirs":
		size := s.dataDirSize()
		return fmt.Sprintf("datadir_size: %d\nlogdir_size: %d\n", size, size)
	case "dump":
		return s.dump()
	case "isro":
		return "rw"
	case "crst":
		for c := range s.conns {
			c.resetStats()
		}
		return "Connection stats reset.\n"
	case "srst":
		s.stats = serverStats{}
		return "Server stats reset.\n"
	case "gtmk":
		return strconv.FormatInt(s.traceMask, 10)
	}
	return "" // stmk: see setTraceMask
}

// setTraceMask answers stmk, whose command is followed by the new mask
// as 8 bytes: ZooKeeper prints the mask it set.
func (s *Server) setTraceMask(c *conn, mask int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.countRecv()
	s.traceMask = mask
	return strconv.FormatInt(mask, 10)
}

// defaultTraceMask is ZooKeeper's initial trace mask (gtmk).
const defaultTraceMask = 306

func (s *Server) srvr(clients bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s\n", fullVersion)
	if clients {
		b.WriteString("Clients:\n")
		b.WriteString(s.cons(false))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Latency min/avg/max: %d/%s/%d\n", s.stats.lat.minimum(), javaDouble(s.stats.lat.avg()), s.stats.lat.max)
	fmt.Fprintf(&b, "Received: %d\n", s.stats.received)
	fmt.Fprintf(&b, "Sent: %d\n", s.stats.sent)
	fmt.Fprintf(&b, "Connections: %d\n", len(s.conns))
	fmt.Fprintf(&b, "Outstanding: 0\n")
	fmt.Fprintf(&b, "Zxid: 0x%x\n", s.zxid)
	fmt.Fprintf(&b, "Mode: standalone\n")
	fmt.Fprintf(&b, "Node count: %d\n", len(s.tree.nodes))
	return b.String()
}

// cons lists the connections, one line each, in ZooKeeper's format: the
// brief form for stat, and for cons the full form for connections with a
// session (a connection without one, such as the one asking, is listed
// briefly either way).
func (s *Server) cons(full bool) string {
	var lines []string
	for c := range s.conns {
		ops := 1 // the interest set: reading
		if c.sid == 0 && s.opts.TLS == nil {
			ops = 0 // NIO's, for the connection asking; Netty's (TLS) says 1
		}
		line := fmt.Sprintf(" %s[%d](queued=0,recved=%d,sent=%d", slashAddr(c), ops, c.recv, c.sent)
		if full && c.sid != 0 {
			var to time.Duration
			if c.sess != nil {
				to = c.sess.timeout
			}
			line += fmt.Sprintf(",sid=0x%x,lop=%s,est=%d,to=%d,lcxid=0x%x,lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
				c.sid, orNA(c.lastOp), c.est.UnixMilli(), to.Milliseconds(), c.lastCxid, c.lastZxid,
				c.lastResp.UnixMilli(), c.lat.last, c.lat.minimum(), int64(c.lat.avg()), c.lat.max)
		}
		lines = append(lines, line+")\n")
	}
	slices.Sort(lines)
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
	line("version", fullVersion)
	line("server_state", "standalone")
	for _, m := range s.metrics() {
		if m.Name == "avg_latency" { // ZooKeeper's one double; the others are longs
			line(m.Name, javaDouble(m.Value))
			continue
		}
		line(m.Name, int64(m.Value))
	}
	line("proposal_count", 0)
	return b.String()
}

// wchc lists the data watches by connection: each connection that has
// set one (ZooKeeper keeps listing it after its watches fired, until it
// closes), then its watched paths.
func (s *Server) wchc() string {
	byConn := map[*conn][]string{}
	for c := range s.watches.watchers {
		byConn[c] = nil
	}
	for p, set := range s.watches.data {
		for c := range set {
			byConn[c] = append(byConn[c], p)
		}
	}
	var blocks []string
	for c, paths := range byConn {
		var b strings.Builder
		fmt.Fprintf(&b, "0x%x\n", c.sid)
		slices.Sort(paths)
		for _, p := range paths {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
		blocks = append(blocks, b.String())
	}
	slices.Sort(blocks)
	return strings.Join(blocks, "")
}

// wchp lists the data watches by path.
func (s *Server) wchp() string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(s.watches.data)) {
		b.WriteString(p + "\n")
		var ids []string
		for c := range s.watches.data[p] {
			ids = append(ids, fmt.Sprintf("\t0x%x\n", c.sid))
		}
		slices.Sort(ids)
		b.WriteString(strings.Join(ids, ""))
	}
	return b.String()
}

// conf answers conf with ZooKeeper's keys, in its order. Without a
// DataDir, the directories are empty and their sizes 0.
func (s *Server) conf() string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	dir := ""
	if s.opts.DataDir != "" {
		dir, _ = filepath.Abs(s.opts.DataDir)
	}
	size := s.dataDirSize()
	line("clientPort", portOf(s.addr))
	line("secureClientPort", portOf(s.secureAddr))
	line("dataDir", dir)
	line("dataDirSize", size)
	line("dataLogDir", dir)
	line("dataLogSize", size)
	line("tickTime", s.opts.TickTime.Milliseconds())
	line("maxClientCnxns", s.opts.MaxConnsPerIP)
	line("minSessionTimeout", s.opts.MinSessionTimeout.Milliseconds())
	line("maxSessionTimeout", s.opts.MaxSessionTimeout.Milliseconds())
	line("clientPortListenBacklog", -1)
	line("serverId", 0)
	return b.String()
}

// portOf returns the port of a "host:port" address, or -1 (ZooKeeper's
// value for a port it does not serve).
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return -1
	}
	return p
}

// dataDirSize returns the bytes of the files in the DataDir.
func (s *Server) dataDirSize() int64 {
	if s.opts.DataDir == "" {
		return 0
	}
	entries, err := os.ReadDir(s.opts.DataDir)
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	return total
}

// dump answers dump as ZooKeeper does: the sessions grouped by when they
// expire (rounded up to a tick), the ephemeral nodes of each session that
// has had one, and, as its NIO connection factory does (not Netty's,
// which serves TLS), the connections grouped by when they expire
// (rounded up to 10 seconds).
func (s *Server) dump() string {
	var b strings.Builder
	b.WriteString("SessionTracker dump:\n")
	sessions := map[time.Time][]string{}
	for id, sess := range s.sessions {
		at := roundUp(sess.deadline, s.opts.TickTime)
		sessions[at] = append(sessions[at], fmt.Sprintf("0x%x", id))
	}
	dumpSets(&b, "Session", sessions, len(s.sessions))
	b.WriteString("ephemeral nodes dump:\n")
	fmt.Fprintf(&b, "Sessions with Ephemerals (%d):\n", len(s.tree.ephemerals))
	for _, id := range slices.Sorted(maps.Keys(s.tree.ephemerals)) {
		fmt.Fprintf(&b, "0x%x:\n", id)
		for _, p := range slices.Sorted(maps.Keys(s.tree.ephemerals[id])) {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	b.WriteString("Connections dump:\n")
	if s.opts.TLS != nil {
		// ZooKeeper serves a secure port with its Netty connection
		// factory, whose dump lists no connections.
		return b.String()
	}
	conns := map[time.Time][]string{}
	for c := range s.conns {
		at := c.est.Add(sessionlessTimeout)
		if c.sess != nil {
			at = c.sess.deadline
		}
		at = roundUp(at, sessionlessTimeout)
		conns[at] = append(conns[at], fmt.Sprintf("ip: %s sessionId: 0x%x", slashAddr(c), c.sid))
	}
	dumpSets(&b, "Connections", conns, len(s.conns))
	return b.String()
}

// dumpSets writes an expiry queue as ZooKeeper's ExpiryQueue.dump does.
func dumpSets(b *strings.Builder, name string, sets map[time.Time][]string, n int) {
	fmt.Fprintf(b, "%s Sets (%d)/(%d):\n", name, len(sets), n)
	for _, at := range slices.SortedFunc(maps.Keys(sets), time.Time.Compare) {
		elems := sets[at]
		slices.Sort(elems)
		fmt.Fprintf(b, "%d expire at %s:\n", len(elems), at.Format(javaDate))
		for _, e := range elems {
			fmt.Fprintf(b, "\t%s\n", e)
		}
	}
}

// javaDate is the layout of Java's Date.toString.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

func roundUp(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return t
	}
	ms := t.UnixMilli()
	step := d.Milliseconds()
	return time.UnixMilli((ms/step + 1) * step)
}

// environment answers envi with the keys of ZooKeeper's Environment, in
// its order. The JVM's properties have no value here: ZooKeeper's value
// for a property that is not set, "<NA>", stands in for them. The memory
// lines are the Go heap's.
func environment() string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }
	or := func(v string, err error) string {
		if err != nil || v == "" {
			return "<NA>"
		}
		return v
	}
	b.WriteString("Environment:\n")
	line("zookeeper.version", fullVersion)
	line("host.name", or(os.Hostname()))
	for _, k := range []string{"java.version", "java.vendor", "java.home", "java.class.path", "java.library.path"} {
		line(k, "<NA>")
	}
	line("java.io.tmpdir", os.TempDir())
	line("java.compiler", "<NA>")
	line("os.name", javaOSName())
	line("os.arch", javaOSArch())
	line("os.version", osVersion())
	name, home := "<NA>", "<NA>"
	if u, err := user.Current(); err == nil {
		name, home = or(u.Username, nil), or(u.HomeDir, nil)
	}
	line("user.name", name)
	line("user.home", home)
	line("user.dir", or(os.Getwd()))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	const mb = 1 << 20
	maxMem := int64(math.MaxInt64) // Java's maxMemory when nothing limits the heap
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		maxMem = limit
	}
	line("os.memory.free", fmt.Sprintf("%dMB", (ms.HeapSys-ms.HeapAlloc)/mb))
	line("os.memory.max", fmt.Sprintf("%dMB", maxMem/mb))
	line("os.memory.total", fmt.Sprintf("%dMB", ms.HeapSys/mb))
	return b.String()
}

// osVersion returns the os.version a JVM reports on Linux: the kernel
// release.
func osVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if v := strings.TrimSpace(string(b)); err == nil && v != "" {
		return v
	}
	return "<NA>"
}

// javaOSName returns the os.name a JVM reports on this system.
func javaOSName() string {
	switch runtime.GOOS {
	case "linux":
		return "Linux"
	case "darwin":
		return "Mac OS X"
	case "windows":
		return "Windows"
	case "freebsd":
		return "FreeBSD"
	}
	return runtime.GOOS
}

// javaOSArch returns the os.arch a JVM reports on this system.
func javaOSArch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "aarch64"
	case "386":
		return "x86"
	}
	return runtime.GOARCH // amd64, ppc64le, s390x, riscv64 are Java's names too
}

// javaDouble formats v as Java's Double.toString does for the values a
// latency average takes.
func javaDouble(v float64) string {
	if v == 0 {
		return "0.0"
	}
	if math.Abs(v) >= 1e-3 && math.Abs(v) < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(v, 'E', -1, 64) // 1E-04
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
