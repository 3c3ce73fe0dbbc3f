package zkadmin

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Ruok sends "ruok" and reports whether the server answered "imok": it
// runs and is not in an error state. It says nothing of a quorum; see
// [Srvr] for that.
func Ruok(ctx context.Context, addr string, opts ...Option) (bool, error) {
	out, err := ask(ctx, addr, "ruok", opts)
	if err != nil {
		return false, err
	}
	return out == "imok", nil
}

// Stats is a server's answer to "srvr".
type Stats struct {
	Version string // such as "3.8.4-...", "built on" and after left out
	// Request latency in milliseconds since the counters were reset.
	LatencyMin, LatencyAvg, LatencyMax float64
	Received, Sent                     int64  // packets since the reset
	Connections                        int    // client connections now
	Outstanding                        int    // requests queued
	Zxid                               int64  // the last transaction id
	Mode                               string // "standalone", "leader", "follower" or "observer"
	NodeCount                          int    // znodes in the tree
}

// Srvr sends "srvr" and parses the answer. A member that has no quorum
// returns [ErrNotServing].
func Srvr(ctx context.Context, addr string, opts ...Option) (Stats, error) {
	out, err := ask(ctx, addr, "srvr", opts)
	if err != nil {
		return Stats{}, err
	}
	return parseSrvr(out)
}

func parseSrvr(out string) (Stats, error) {
	var s Stats
	var err error
	seen := 0
	num := func(v string, bits int) int64 {
		n, e := strconv.ParseInt(v, 0, bits)
		if e != nil && err == nil {
			err = e
		}
		return n
	}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		seen++
		switch k {
		case "Zookeeper version":
			s.Version, _, _ = strings.Cut(v, ", built on")
		case "Latency min/avg/max":
			f := strings.Split(v, "/")
			if len(f) != 3 {
				return Stats{}, fmt.Errorf("zkadmin: srvr: latency %q", v)
			}
			var ls [3]float64
			for i, x := range f {
				ls[i], err = strconv.ParseFloat(x, 64)
				if err != nil {
					return Stats{}, fmt.Errorf("zkadmin: srvr: latency %q: %w", v, err)
				}
			}
			s.LatencyMin, s.LatencyAvg, s.LatencyMax = ls[0], ls[1], ls[2]
		case "Received":
			s.Received = num(v, 64)
		case "Sent":
			s.Sent = num(v, 64)
		case "Connections":
			s.Connections = int(num(v, 32))
		case "Outstanding":
			s.Outstanding = int(num(v, 32))
		case "Zxid":
			s.Zxid = num(v, 64)
		case "Mode":
			s.Mode = v
		case "Node count":
			s.NodeCount = int(num(v, 32))
		default:
			seen--
		}
	}
	if err != nil {
		return Stats{}, fmt.Errorf("zkadmin: srvr: %w", err)
	}
	if s.Mode == "" || seen < 9 {
		return Stats{}, fmt.Errorf("zkadmin: srvr: unexpected answer %q", out)
	}
	return s, nil
}

// Mntr sends "mntr" and returns its key-value pairs, such as
// "zk_server_state" and "zk_znode_count", as the server wrote them.
func Mntr(ctx context.Context, addr string, opts ...Option) (map[string]string, error) {
	out, err := ask(ctx, addr, "mntr", opts)
	if err != nil {
		return nil, err
	}
	return pairs(out, "\t", "mntr")
}

// Conf sends "conf" and returns the server's configuration, such as
// "clientPort" and "tickTime". Lines that are not key=value pairs (the
// ensemble's "membership:" header) are left out.
func Conf(ctx context.Context, addr string, opts ...Option) (map[string]string, error) {
	out, err := ask(ctx, addr, "conf", opts)
	if err != nil {
		return nil, err
	}
	return pairs(out, "=", "conf")
}

// Envi sends "envi" and returns the server's environment, such as
// "zookeeper.version" and "java.version".
func Envi(ctx context.Context, addr string, opts ...Option) (map[string]string, error) {
	out, err := ask(ctx, addr, "envi", opts)
	if err != nil {
		return nil, err
	}
	return pairs(out, "=", "envi")
}

// pairs parses the lines of out that split around sep.
func pairs(out, sep, word string) (map[string]string, error) {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), sep); ok {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("zkadmin: %s: unexpected answer %q", word, out)
	}
	return m, nil
}

// Conn is one client connection as "cons" lists it.
type Conn struct {
	Addr      string // the client's address, "host:port"
	SessionID int64  // 0 for a connection without a session (such as the one asking)
	// Fields are the counters and facts in parentheses: "queued",
	// "recved", "sent", and with a session "sid", "lop" (last
	// operation), "est" (established, ms since the epoch), "to"
	// (timeout, ms), "lcxid", "lzxid", "lresp", "llat", "minlat",
	// "avglat" and "maxlat".
	Fields map[string]string
}

var consLine = regexp.MustCompile(`^\s*/(\S+)\[\d+\]\((.*)\)\s*$`)

// Cons sends "cons" and returns the server's client connections.
func Cons(ctx context.Context, addr string, opts ...Option) ([]Conn, error) {
	out, err := ask(ctx, addr, "cons", opts)
	if err != nil {
		return nil, err
	}
	return parseCons(out)
}

func parseCons(out string) ([]Conn, error) {
	var conns []Conn
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := consLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("zkadmin: cons: unexpected line %q", line)
		}
		c := Conn{Addr: m[1], Fields: map[string]string{}}
		for f := range strings.SplitSeq(m[2], ",") {
			if k, v, ok := strings.Cut(f, "="); ok {
				c.Fields[k] = v
			}
		}
		if sid, ok := c.Fields["sid"]; ok {
			id, err := strconv.ParseUint(sid, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("zkadmin: cons: session id %q: %w", sid, err)
			}
			c.SessionID = int64(id)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// WatchSummary is a server's answer to "wchs".
type WatchSummary struct {
	Connections int // connections that hold watches
	Paths       int // paths watched
	Watches     int // watches in all
}

var wchsAnswer = regexp.MustCompile(`(\d+) connections watching (\d+) paths\s+Total watches:\s*(\d+)`)

// Wchs sends "wchs" and parses the answer.
func Wchs(ctx context.Context, addr string, opts ...Option) (WatchSummary, error) {
	out, err := ask(ctx, addr, "wchs", opts)
	if err != nil {
		return WatchSummary{}, err
	}
	m := wchsAnswer.FindStringSubmatch(out)
	if m == nil {
		return WatchSummary{}, fmt.Errorf("zkadmin: wchs: unexpected answer %q", out)
	}
	var n [3]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1]) // \d+ of a sane size
	}
	return WatchSummary{Connections: n[0], Paths: n[1], Watches: n[2]}, nil
}

// Wchp sends "wchp" and returns the sessions that watch each path. It
// lists data watches (getData, exists); ZooKeeper 3.8 leaves child and
// persistent watches out.
func Wchp(ctx context.Context, addr string, opts ...Option) (map[string][]int64, error) {
	out, err := ask(ctx, addr, "wchp", opts)
	if err != nil {
		return nil, err
	}
	m := map[string][]int64{}
	err = blocks(out, func(head, item string) error {
		id, err := strconv.ParseUint(item, 0, 64)
		m[head] = append(m[head], int64(id))
		return err
	}, func(head string) { m[head] = nil })
	if err != nil {
		return nil, fmt.Errorf("zkadmin: wchp: %w", err)
	}
	return m, nil
}

// Wchc sends "wchc" and returns the paths each session watches, as
// [Wchp] does by path.
func Wchc(ctx context.Context, addr string, opts ...Option) (map[int64][]string, error) {
	out, err := ask(ctx, addr, "wchc", opts)
	if err != nil {
		return nil, err
	}
	m := map[int64][]string{}
	var id int64
	err = blocks(out, func(_, item string) error {
		m[id] = append(m[id], item)
		return nil
	}, func(head string) {
		n, _ := strconv.ParseUint(head, 0, 64)
		id = int64(n)
		m[id] = nil
	})
	if err != nil {
		return nil, fmt.Errorf("zkadmin: wchc: %w", err)
	}
	return m, nil
}

// SessionDump is a server's answer to "dump": the sessions it tracks and
// the ephemeral nodes they own.
type SessionDump struct {
	// Sessions are the ids the session tracker lists, in ascending
	// order: each session until it ends or expires, connected or not.
	Sessions []int64
	// Ephemerals are the paths of the ephemeral nodes of each session
	// that owns any.
	Ephemerals map[int64][]string
}

// Dump sends "dump" and parses its session tracker and ephemeral nodes
// (the connections it lists are those [Cons] returns). Every member of an
// ensemble lists every session, the followers in a form of their own
// ("Global Sessions"), which Dump reads as well.
func Dump(ctx context.Context, addr string, opts ...Option) (SessionDump, error) {
	out, err := ask(ctx, addr, "dump", opts)
	if err != nil {
		return SessionDump{}, err
	}
	return parseDump(out)
}

func parseDump(out string) (SessionDump, error) {
	tracker, rest, ok := strings.Cut(out, "ephemeral nodes dump:\n")
	tracker, ok2 := strings.CutPrefix(tracker, "SessionTracker dump:\n")
	if !ok || !ok2 {
		return SessionDump{}, fmt.Errorf("zkadmin: dump: unexpected answer %q", out)
	}
	ephemerals, _, _ := strings.Cut(rest, "Connections dump:\n")
	d := SessionDump{Ephemerals: map[int64][]string{}}
	// An expiry queue ("Session Sets", then a tab-indented id per line)
	// or a follower's list ("0x...\t10000ms"): ids begin the lines that
	// begin with 0x once trimmed; headers do not.
	for line := range strings.Lines(tracker) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "0x") {
			continue
		}
		id, err := strconv.ParseUint(f[0], 0, 64)
		if err != nil {
			return SessionDump{}, fmt.Errorf("zkadmin: dump: session %q: %w", line, err)
		}
		d.Sessions = append(d.Sessions, int64(id))
	}
	slices.Sort(d.Sessions)
	// "Sessions with Ephemerals (N):", then blocks of "0x...:" and the
	// session's tab-indented paths.
	_, ephemerals, _ = strings.Cut(ephemerals, "\n")
	err := blocks(ephemerals, func(head, item string) error {
		id, err := strconv.ParseUint(strings.TrimSuffix(head, ":"), 0, 64)
		d.Ephemerals[int64(id)] = append(d.Ephemerals[int64(id)], item)
		return err
	}, func(string) {})
	if err != nil {
		return SessionDump{}, fmt.Errorf("zkadmin: dump: ephemeral nodes: %w", err)
	}
	return d, nil
}

// blocks walks an answer made of unindented heads, each followed by its
// tab-indented items.
func blocks(out string, item func(head, item string) error, head func(string)) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	cur := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "\t"):
			if cur == "" {
				return fmt.Errorf("item %q before any head", line)
			}
			if err := item(cur, strings.TrimSpace(line)); err != nil {
				return err
			}
		default:
			cur = line
			head(cur)
		}
	}
	return sc.Err()
}
