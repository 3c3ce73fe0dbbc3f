package zkserver_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
)

// versionLine is the first line of srvr and stat on ZooKeeper 3.7 and
// later: the version, a dash and the build's commit id, and the build
// date. (Debian's build of 3.8.0 has "${mvngit.commit.id}" for the id.)
var versionLine = regexp.MustCompile(`^Zookeeper version: 3\.8\.0-[^,\s]+, built on \d{4}-\d\d-\d\d \d\d:\d\d UTC$`)

// kazooVersion parses the zookeeper.version of envi as kazoo's
// server_version does: the leading digits and dots.
func kazooVersion(envi string) string {
	for _, line := range strings.Split(envi, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "zookeeper.version" {
			return regexp.MustCompile(`^[\d.]*`).FindString(strings.TrimSpace(v))
		}
	}
	return "<missing>"
}

func TestConformanceFourLetterWords(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		ask := func(cmd string) string {
			out, _ := flw(t, tg.addr, cmd)
			return out
		}
		r.logf("ruok: %q", ask("ruok"))
		r.logf("isro: %q", ask("isro"))
		r.logf("crst: %q", ask("crst"))
		r.logf("srst: %q", ask("srst"))
		r.logf("gtmk: %q", ask("gtmk"))
		mask := make([]byte, 8)
		binary.BigEndian.PutUint64(mask, 0x1ff)
		out, _ := flw(t, tg.addr, "stmk", mask...)
		r.logf("stmk 0x1ff: %q, then gtmk: %q", out, ask("gtmk"))
		binary.BigEndian.PutUint64(mask, 306)
		out, _ = flw(t, tg.addr, "stmk", mask...)
		r.logf("stmk 306: %q", out)

		// srvr and stat: the keys, the version line's form, the mode; the
		// connection asking is listed by stat, briefly, as having sent one
		// packet and received none.
		srvr := ask("srvr")
		lines := strings.Split(strings.TrimSuffix(srvr, "\n"), "\n")
		r.logf("srvr version line %q matches: %v", redactVersion(lines[0]), versionLine.MatchString(lines[0]))
		for _, line := range lines[1:] {
			key, value, _ := strings.Cut(line, ": ")
			if key == "Mode" {
				key += "=" + value
			}
			if key == "Latency min/avg/max" {
				key += fmt.Sprintf(" well-formed:%v", regexp.MustCompile(`^\d+/\d+\.\d+/\d+$`).MatchString(value))
			}
			r.logf("srvr line %s", key)
		}
		stat, local := flw(t, tg.addr, "stat")
		for _, line := range strings.Split(stat, "\n") {
			switch {
			case strings.HasPrefix(line, " /"+local+"["):
				r.logf("stat lists the asking connection: %q", strings.TrimPrefix(line, " /"+local))
			case strings.HasPrefix(line, " /"):
			default:
				key, _, _ := strings.Cut(line, ":")
				r.logf("stat line %q", key)
			}
		}
		// zkadmin parses both answers alike. (go-zookeeper/zk's FLWSrvr on
		// both: internal/gozk's TestFLWSrvrOnZkserver.)
		st, err := zkadmin.Srvr(t.Context(), tg.addr)
		r.logf("zkadmin.Srvr: mode=%s version-prefix=%v err=%v", st.Mode, strings.HasPrefix(lines[0], "Zookeeper version: "+st.Version), err)

		// envi: the keys in ZooKeeper's order, and the version kazoo reads.
		envi := ask("envi")
		var keys []string
		for _, line := range strings.Split(strings.TrimSuffix(envi, "\n"), "\n")[1:] {
			k, _, _ := strings.Cut(line, "=")
			keys = append(keys, k)
		}
		r.logf("envi header %q keys %v", strings.SplitN(envi, "\n", 2)[0], keys)
		r.logf("envi version (kazoo's reading) %s", kazooVersion(envi))
		_, ver, _ := strings.Cut(envi, "\nzookeeper.version=")
		ver, _, _ = strings.Cut(ver, "\n")
		r.logf("envi version matches srvr's: %v", "Zookeeper version: "+ver == lines[0])

		// conf: the keys in order; the values of the settings both servers
		// share; the port asked on.
		_, port, _ := net.SplitHostPort(tg.addr)
		conf := ask("conf")
		for _, line := range strings.Split(strings.TrimSuffix(conf, "\n"), "\n") {
			k, v, _ := strings.Cut(line, "=")
			switch k {
			case "clientPort":
				r.logf("conf %s is the port asked: %v", k, v == port)
			case "dataDir", "dataLogDir", "dataDirSize", "dataLogSize":
				r.logf("conf %s", k)
			default:
				r.logf("conf %s=%s", k, v)
			}
		}
		r.logf("dirs well-formed: %v", regexp.MustCompile(`^datadir_size: \d+\nlogdir_size: \d+\n$`).MatchString(ask("dirs")))

		mntr := ask("mntr")
		for _, key := range []string{"zk_server_state\tstandalone\n", "zk_znode_count\t", "zk_watch_count\t",
			"zk_ephemerals_count\t", "zk_num_alive_connections\t", "zk_outstanding_requests\t0\n",
			"zk_global_sessions\t", "zk_packets_received\t", "zk_packets_sent\t", "zk_avg_latency\t",
			"zk_min_latency\t", "zk_max_latency\t", "zk_approximate_data_size\t", "zk_uptime\t"} {
			r.logf("mntr has %q: %v", key, strings.Contains(mntr, key))
		}
		r.logf("mntr version matches srvr's: %v", strings.Contains(mntr, "zk_version\t"+strings.TrimPrefix(lines[0], "Zookeeper version: ")+"\n"))
		r.logf("wchs well-formed: %v", regexp.MustCompile(`^\d+ connections watching \d+ paths\nTotal watches:\d+\n$`).MatchString(ask("wchs")))
		r.logf("unknown word: %q", ask("zzzz"))
	})
}

// redactVersion replaces the commit id and the date of a version line,
// which differ between builds.
func redactVersion(line string) string {
	return regexp.MustCompile(`3\.8\.0-[^,\s]+, built on .*`).ReplaceAllString(line, "3.8.0-<build>, built on <date>")
}

// TestConformanceConnectionDumps compares cons, stat, wchc, wchp, wchs
// and dump for the sessions of the test: which session and path each
// lists and in what form. Other tests' sessions, which may linger on the
// shared servers, are left out.
func TestConformanceConnectionDumps(t *testing.T) {
	conform(t, func(t *testing.T, tg target, r *rec) {
		base := stableWchs(t, tg.addr) // the other tests' watches, if any
		a := newRaw(t, tg.addr)
		b := newRaw(t, tg.addr)
		r.session(a.id, "A")
		r.session(b.id, "B")
		r.logf("session ids' top byte: %#x %#x", uint64(a.id)>>56, uint64(b.id)>>56)
		p := tg.path
		r.do(a, "A", create(p, "", 0))
		r.do(a, "A", create(p+"/a", "", 0))
		r.do(a, "A", create(p+"/e", "", 1))
		r.do(b, "B", create(p+"/f", "", 1))
		r.do(b, "B", create(p+"/g", "", 1))
		r.do(a, "A", getData(p+"/a", true))   // a data watch
		r.do(a, "A", children(p, true))       // a child watch: not in wchc, wchp, wchs
		r.do(b, "B", exists(p+"/nope", true)) // a data watch on a missing node
		r.do(b, "B", getData(p+"/a", true))   // a second watcher of /a
		r.do(b, "B", children(p+"/a", true))  // child watch only
		r.do(a, "A", del(p+"/e", -1))         // A's child watch on p fires; A keeps an empty ephemeral entry
		r.logf("-- two sessions watching")
		r.logf("wchs, beyond the other tests': %v", wchsDelta(t, tg.addr, base))
		r.dumps(t, tg, a, b)
		r.do(b, "B", setData(p+"/a", "x", -1)) // both data watches on /a fire
		r.expectEvents(a, "A", 1)
		r.do(b, "B", jute.Request{Op: jute.OpRemoveWatches, Path: p + "/nope", Mode: jute.WatcherAny})
		r.logf("-- after the watches fired and were removed")
		r.logf("wchs, beyond the other tests': %v", wchsDelta(t, tg.addr, base))
		r.dumps(t, tg, a, b)
	})
}

// stableWchs returns wchs once two answers in a row agree: the
// connections of earlier tests are closed by then.
func stableWchs(t *testing.T, addr string) [3]int {
	t.Helper()
	last := wchs(t, addr)
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		n := wchs(t, addr)
		if n == last {
			return n
		}
		last = n
	}
	return last
}

// wchsDelta returns wchs's numbers minus base.
func wchsDelta(t *testing.T, addr string, base [3]int) string {
	t.Helper()
	n := wchs(t, addr)
	return fmt.Sprintf("%d connections watching %d paths, %d watches", n[0]-base[0], n[1]-base[1], n[2]-base[2])
}

// dumps records what the watch and dump commands say about the test's
// sessions a and b.
func (r *rec) dumps(t *testing.T, tg target, a, b *rawClient) {
	t.Helper()
	ours := func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("0x%x", a.id)) || strings.Contains(s, fmt.Sprintf("0x%x", b.id))
	}
	name := func(s string) string {
		s = strings.ReplaceAll(s, fmt.Sprintf("0x%x", a.id), "A")
		s = strings.ReplaceAll(s, fmt.Sprintf("0x%x", b.id), "B")
		return strings.ReplaceAll(s, tg.path, "~")
	}
	ask := func(cmd string) string {
		out, _ := flw(t, tg.addr, cmd)
		return out
	}
	// wchc: blocks of a session line and its paths, ending in a blank line.
	wchc := ask("wchc")
	r.logf("wchc ends in a blank line: %v", strings.HasSuffix(wchc, "\n\n") || wchc == "\n")
	var blocks []string
	for _, block := range splitBlocks(wchc) {
		if ours(block[0]) {
			blocks = append(blocks, name(strings.Join(sorted(block[1:]), ",")+" <- "+block[0]))
		}
	}
	r.logf("wchc %v", sorted(blocks))
	wchp := ask("wchp")
	r.logf("wchp ends in a blank line: %v", strings.HasSuffix(wchp, "\n\n") || wchp == "\n")
	blocks = nil
	for _, block := range splitBlocks(wchp) {
		if strings.HasPrefix(block[0], tg.path) {
			blocks = append(blocks, name(block[0]+" <- "+strings.Join(sorted(block[1:]), ",")))
		}
	}
	r.logf("wchp %v", sorted(blocks))

	// dump: the three sections and their headers, then each of our
	// sessions, ephemeral nodes and connections.
	dump := ask("dump")
	var sessions, conns []string
	var ephemerals [][]string // a session's line, then its paths
	section := ""
	for _, line := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
		switch {
		case line == "SessionTracker dump:" || line == "ephemeral nodes dump:" || line == "Connections dump:":
			section = line
			r.logf("dump %s", line)
		case regexp.MustCompile(`^(Session|Connections) Sets \(\d+\)/\(\d+\):$`).MatchString(line),
			regexp.MustCompile(`^Sessions with Ephemerals \(\d+\):$`).MatchString(line):
			r.logf("dump header %s", regexp.MustCompile(`\d+`).ReplaceAllString(line, "N"))
		case regexp.MustCompile(`^\d+ expire at \w{3} \w{3} \d\d \d\d:\d\d:\d\d \w+ \d{4}:$`).MatchString(line):
		case section == "ephemeral nodes dump:" && strings.HasSuffix(line, ":"):
			ephemerals = append(ephemerals, []string{line})
		case section == "ephemeral nodes dump:" && len(ephemerals) > 0:
			ephemerals[len(ephemerals)-1] = append(ephemerals[len(ephemerals)-1], line)
		case !ours(line):
		case section == "SessionTracker dump:":
			sessions = append(sessions, name(line))
		case section == "Connections dump:":
			ip := regexp.MustCompile(`^\tip: /127\.0\.0\.1:(\d+) sessionId: (0x[0-9a-f]+)$`).FindStringSubmatch(line)
			if ip == nil {
				conns = append(conns, "malformed: "+line)
				continue
			}
			mine := ip[1] == port(a.nc.LocalAddr()) && ip[2] == fmt.Sprintf("0x%x", a.id) ||
				ip[1] == port(b.nc.LocalAddr()) && ip[2] == fmt.Sprintf("0x%x", b.id)
			conns = append(conns, fmt.Sprintf("%s own address:%v", name(ip[2]), mine))
		default:
			r.logf("dump unexpected line %q in %s", name(line), section)
		}
	}
	var eph []string
	for _, e := range ephemerals {
		if ours(e[0]) {
			eph = append(eph, name(e[0]+strings.Join(sorted(e[1:]), "")))
		}
	}
	r.logf("dump sessions %v", sorted(sessions))
	r.logf("dump ephemerals %v", sorted(eph))
	r.logf("dump connections %v", sorted(conns))

	// cons: our connections in full, with their counts and last
	// operation; the asking connection briefly.
	cons, local := flw(t, tg.addr, "cons")
	r.logf("cons ends in a blank line: %v", strings.HasSuffix(cons, ")\n\n"))
	full := regexp.MustCompile(`^ /127\.0\.0\.1:(\d+)\[1\]\(queued=0,recved=(\d+),sent=(\d+),sid=(0x[0-9a-f]+),lop=(\w+),est=\d+,to=(\d+),lcxid=(0x[0-9a-f]+),lzxid=0x[0-9a-f]+,lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,maxlat=\d+\)$`)
	var lines []string
	for _, line := range strings.Split(cons, "\n") {
		switch {
		case strings.HasPrefix(line, " /"+local+"["):
			lines = append(lines, "asking: "+strings.TrimPrefix(line, " /"+local))
		case ours(line):
			m := full.FindStringSubmatch(line)
			if m == nil {
				lines = append(lines, "malformed: "+name(line))
				continue
			}
			lines = append(lines, fmt.Sprintf("%s recved=%s sent=%s lop=%s to=%s lcxid=%s",
				name(m[4]), m[2], m[3], m[5], m[6], m[7]))
		}
	}
	r.logf("cons %v", sorted(lines))
}

func port(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

// splitBlocks splits the answer of wchc or wchp into blocks: a line
// without a leading tab, then the tabbed lines under it.
func splitBlocks(s string) [][]string {
	var out [][]string
	for _, line := range strings.Split(s, "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "\t"):
			if len(out) > 0 {
				out[len(out)-1] = append(out[len(out)-1], strings.TrimPrefix(line, "\t"))
			}
		default:
			out = append(out, []string{line})
		}
	}
	return out
}
