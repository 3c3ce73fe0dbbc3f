package zkserver_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The conformance suite runs each test body against a real ZooKeeper 3.8
// (one server shared by the package) and against zkserver, records a
// transcript of what each server answered, normalised so that values that
// legitimately differ (zxids, times, session ids) become placeholders,
// and requires the two transcripts to be equal.
//
// Each case file mirrors the implementation file whose behaviour its
// cases pin: conformance_write_test.go for write.go, and so on. The
// cases named Edges, and PathNames, CreateModes and LargeRequests, are
// the edge cases of the calls client libraries make in normal use:
// go-zookeeper/zk (Create with each flag, CreateContainer, CreateTTL,
// CreateProtectedEphemeralSequential, Children, Multi, SetACL, AddAuth,
// Sync), kazoo (create with makepath and include_data, get_children,
// transaction with check, set_acls, add_auth, ensure_path, sync) and
// Curator (creatingParentContainersIfNeeded, transaction, guaranteed
// delete, checkWatches when a specific watcher is removed, getConfig).

var (
	realZK    *zktest.Cluster
	realZKErr error
	embedded  *zkserver.Server
	runNonce  = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	caseSeq   atomic.Int64 // numbers the paths casePath gives
)

func TestMain(m *testing.M) {
	if os.Getenv("ZKSERVER_NO_ZOOKEEPER") == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		realZK, realZKErr = zktest.Start(ctx, zktest.Options{Heap: "256m", RealZooKeeper: true})
		cancel()
	} else {
		realZKErr = fmt.Errorf("ZKSERVER_NO_ZOOKEEPER is set")
	}
	embedded = zkserver.NewServer(zkserver.Options{})
	if err := embedded.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	embedded.Close()
	if realZK != nil {
		realZK.Close()
	}
	closeTLSPair()
	closeSASLPairs()
	os.Exit(code)
}

// target is one of the two servers under comparison.
type target struct {
	name string
	addr string
	path string // a fresh path for the test, the same on both servers
}

// rec is a transcript being recorded.
type rec struct {
	t        *testing.T
	lines    []string
	zxids    []int64
	sessions map[int64]string
}

var tokenRE = regexp.MustCompile("\x00Z([0-9]+)\x00")

// Z returns a placeholder for a zxid; transcripts compare zxids by rank.
func (r *rec) Z(v int64) string {
	r.zxids = append(r.zxids, v)
	return fmt.Sprintf("\x00Z%d\x00", len(r.zxids)-1)
}

// S names a session id: known sessions by the name given in session,
// 0 as 0, others as "?".
func (r *rec) S(id int64) string {
	if id == 0 {
		return "0"
	}
	if n, ok := r.sessions[id]; ok {
		return n
	}
	return fmt.Sprintf("other(%#x)", uint64(id)>>56)
}

func (r *rec) session(id int64, name string) { r.sessions[id] = name }

func (r *rec) logf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// normalized returns the transcript with zxid placeholders replaced by
// their rank among the distinct zxids recorded.
func (r *rec) normalized() []string {
	uniq := slices.Clone(r.zxids)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	out := make([]string, len(r.lines))
	for i, l := range r.lines {
		out[i] = tokenRE.ReplaceAllStringFunc(l, func(tok string) string {
			idx, _ := strconv.Atoi(tokenRE.FindStringSubmatch(tok)[1])
			rank, _ := slices.BinarySearch(uniq, r.zxids[idx])
			return "z" + strconv.Itoa(rank)
		})
	}
	return out
}

// conform runs body against both servers and compares the transcripts.
func conform(t *testing.T, body func(t *testing.T, tg target, r *rec)) {
	t.Helper()
	path := casePath(t)
	targets := []target{{name: "zkserver", addr: embedded.Addr(), path: path}}
	if realZKErr == nil {
		targets = append([]target{{name: "zookeeper", addr: realZK.Addr(0), path: path}}, targets...)
	}
	var sides []side
	for _, tg := range targets {
		sides = append(sides, side{name: tg.name, addr: tg.addr, tree: tg.path,
			run: func(t *testing.T, r *rec) { body(t, tg, r) }})
	}
	compare(t, realZKErr, sides)
}

// skipWithoutZooKeeper skips t (or fails it, see zktest.SkipOrFail)
// because the real ZooKeeper of a pair of servers did not start: err
// says why.
func skipWithoutZooKeeper(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("ZKSERVER_NO_ZOOKEEPER") != "" {
		t.Skip("skipped: ZKSERVER_NO_ZOOKEEPER is set")
	}
	zktest.SkipOrFail(t, err)
}

// casePath is a fresh path for the case t, to give both servers: fresh
// in every run of the case too (-count=N), so that no run meets what an
// earlier one left, such as an ephemeral node of a session that has not
// expired yet.
func casePath(t *testing.T) string {
	return "/conf-" + runNonce + "-" + strconv.FormatInt(caseSeq.Add(1), 10) + "-" + strings.ReplaceAll(t.Name(), "/", "_")
}

// side is one server's run of a case.
type side struct {
	name string // "zookeeper" or "zkserver"
	addr string // the server's plain client port
	run  func(*testing.T, *rec)
	tree string // the case's path, removed when the case ends; "" to keep it
}

// compare runs each side's case, each recording a transcript, and
// requires the transcripts of "zookeeper" and "zkserver" to be equal;
// realErr says why there is no real ZooKeeper, if there is none.
//
// A server's transcript is strict about zxids, so nothing but the case
// may write to it while the case runs. Each side's case therefore ends
// only when the server lists no sessions (those the case closed are gone
// at once; one it could not close, such as a connection the server cut
// in the middle of a request, is waited out until it expires) and, with
// tree set, once the case's nodes are removed (an empty container left
// behind would be deleted by the server's container check, a minute
// later, in another case).
func compare(t *testing.T, realErr error, sides []side) {
	t.Helper()
	got := map[string][]string{}
	for _, sd := range sides {
		r := &rec{sessions: map[int64]string{}}
		ok := t.Run(sd.name, func(t *testing.T) {
			// Registered first, so run after the case's own cleanups,
			// which close its sessions.
			t.Cleanup(func() {
				waitNoSessions(t, sd.addr)
				if sd.tree != "" {
					removeTree(t, sd.addr, sd.tree)
				}
			})
			r.t = t
			sd.run(t, r)
		})
		if !ok {
			t.Logf("%s transcript so far:\n%s", sd.name, strings.Join(r.normalized(), "\n"))
			return
		}
		got[sd.name] = r.normalized()
	}
	if realErr != nil {
		if os.Getenv("ZKSERVER_NO_ZOOKEEPER") != "" {
			t.Skip("comparison skipped: ZKSERVER_NO_ZOOKEEPER is set")
		}
		zktest.SkipOrFail(t, realErr)
		return
	}
	want, have := got["zookeeper"], got["zkserver"]
	if os.Getenv("ZKSERVER_SHOW_TRANSCRIPTS") != "" {
		t.Logf("transcripts (zookeeper, then zkserver):\n%s", diff(want, have))
	}
	if !slices.Equal(want, have) {
		t.Errorf("transcripts differ\n%s", diff(want, have))
	}
}

func diff(want, have []string) string {
	var b strings.Builder
	for i := range max(len(want), len(have)) {
		w, h := "<none>", "<none>"
		if i < len(want) {
			w = want[i]
		}
		if i < len(have) {
			h = have[i]
		}
		mark := "  "
		if w != h {
			mark = "!="
		}
		fmt.Fprintf(&b, "%s zookeeper: %s\n   zkserver:  %s\n", mark, w, h)
	}
	return b.String()
}

// do sends a request on c and records every frame up to and including
// the reply, decoded and normalised.
func (r *rec) do(c *rawClient, label string, req jute.Request) frame {
	r.t.Helper()
	start := len(c.frames)
	f := c.call(req)
	for _, g := range c.frames[start:] {
		if g.event != nil {
			r.logf("%s: event type=%d path=%s", label, g.event.Type, g.event.Path)
			continue
		}
		if g.hdr.Xid != f.hdr.Xid {
			continue
		}
		r.logf("%s: op=%d err=%d zxid=%s %s", label, req.Op, g.hdr.Err, r.Z(g.hdr.Zxid), r.describe(req, g))
	}
	return f
}

// expectEvents reads until c has n more notifications and records them.
func (r *rec) expectEvents(c *rawClient, label string, n int) {
	r.t.Helper()
	seen := 0
	for _, f := range c.frames {
		if f.event != nil {
			seen++
		}
	}
	evs := c.events(seen + n)
	for _, ev := range evs[seen:] {
		r.logf("%s: event type=%d path=%s", label, ev.Type, ev.Path)
	}
}

// expectEventsUnordered is expectEvents for events whose order ZooKeeper
// does not define; they are recorded sorted.
func (r *rec) expectEventsUnordered(c *rawClient, label string, n int) {
	r.t.Helper()
	start := len(r.lines)
	r.expectEvents(c, label, n)
	slices.Sort(r.lines[start:])
}

// describe decodes a reply body for the transcript.
func (r *rec) describe(req jute.Request, f frame) string {
	if f.hdr.Err != 0 && req.Op != jute.OpMulti {
		return "body=" + hex.EncodeToString(f.body)
	}
	d := jute.NewDecoder(f.body)
	var s string
	switch req.Op {
	case jute.OpCreate, jute.OpSync:
		s = "path=" + d.String()
	case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		s = "path=" + d.String() + " " + r.stat(d)
	case jute.OpExists, jute.OpSetData, jute.OpSetACL:
		s = r.stat(d)
	case jute.OpGetData:
		s = fmt.Sprintf("data=%s %s", fmtData(d.Buffer()), r.stat(d))
	case jute.OpGetChildren:
		s = fmt.Sprintf("children=%v", sorted(d.Strings()))
	case jute.OpGetChildren2:
		s = fmt.Sprintf("children=%v %s", sorted(d.Strings()), r.stat(d))
	case jute.OpGetACL:
		s = fmt.Sprintf("acl=%v %s", jute.DecodeACLs(d), r.stat(d))
	case jute.OpGetEphemerals:
		s = fmt.Sprintf("ephemerals=%v", sorted(d.Strings()))
	case jute.OpGetAllChildrenNumber:
		s = fmt.Sprintf("number=%d", d.Int32())
	case jute.OpWhoAmI:
		n := d.VectorLen(8)
		var ids []string
		for range n {
			ids = append(ids, d.String()+":"+d.String())
		}
		s = fmt.Sprintf("whoami=%v", ids)
	case jute.OpMulti, jute.OpMultiRead:
		s = r.results(d)
	}
	if rest := d.Rest(); len(rest) > 0 || d.Err() != nil {
		s += fmt.Sprintf(" rest=%x err=%v", rest, d.Err())
	}
	return s
}

func (r *rec) results(d *jute.Decoder) string {
	var parts []string
	for d.Err() == nil {
		var h jute.MultiHeader
		h.Decode(d)
		if h.Done {
			parts = append(parts, fmt.Sprintf("end(%d,%d)", h.Type, h.Err))
			break
		}
		p := fmt.Sprintf("[type=%d err=%d", h.Type, h.Err)
		switch h.Type {
		case jute.OpError:
			p += fmt.Sprintf(" code=%d", d.Int32())
		case jute.OpCreate:
			p += " path=" + d.String()
		case jute.OpCreate2:
			p += " path=" + d.String() + " " + r.stat(d)
		case jute.OpSetData:
			p += " " + r.stat(d)
		case jute.OpGetData:
			p += fmt.Sprintf(" data=%s %s", fmtData(d.Buffer()), r.stat(d))
		case jute.OpGetChildren:
			p += fmt.Sprintf(" children=%v", sorted(d.Strings()))
		}
		parts = append(parts, p+"]")
	}
	return "results=" + strings.Join(parts, " ")
}

// fmtData shows data as a quoted string, or null for a null buffer
// (length -1), which ZooKeeper keeps apart from an empty one.
func fmtData(b []byte) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprintf("%q", b)
}

func (r *rec) stat(d *jute.Decoder) string {
	var st jute.Stat
	st.Decode(d)
	return r.fmtStat(st)
}

func (r *rec) fmtStat(st jute.Stat) string {
	return fmt.Sprintf("stat{czxid=%s mzxid=%s pzxid=%s mtime>=ctime:%v v=%d cv=%d av=%d owner=%s len=%d nch=%d}",
		r.Z(st.Czxid), r.Z(st.Mzxid), r.Z(st.Pzxid), st.Mtime >= st.Ctime, st.Version, st.Cversion, st.Aversion,
		r.S(st.EphemeralOwner), st.DataLength, st.NumChildren)
}

func sorted(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	return v
}

// Request constructors for the transcripts.

// waitNoSessions waits until the server at addr lists no sessions.
// A session the case could not close ends when it expires: the bound
// leaves room for the 4 s sessions the cases open.
func waitNoSessions(t *testing.T, addr string) {
	t.Helper()
	if err := zktest.NoSessions(addr, 20*time.Second); err != nil {
		t.Fatalf("the case's sessions do not end: %v", err)
	}
}

// removeTree deletes path and the nodes under it on the server at addr,
// those its ACLs let an unauthenticated session delete, with a session
// of its own, which ends with t as every raw client's does.
func removeTree(t *testing.T, addr, path string) {
	t.Helper()
	c := newRaw(t, addr)
	var nodes []string
	for todo := []string{path}; len(todo) > 0; {
		p := todo[0]
		todo = todo[1:]
		f := c.call(children(p, false))
		if f.hdr.Err != 0 {
			continue
		}
		nodes = append(nodes, p)
		for _, kid := range jute.NewDecoder(f.body).Strings() {
			todo = append(todo, p+"/"+kid)
		}
	}
	// Children before their parents; the replies, errors or not, are
	// read before the session closes.
	for i := len(nodes) - 1; i >= 0; i-- {
		c.send(del(nodes[i], -1))
	}
	for range nodes {
		if _, err := c.readFrame(); err != nil {
			t.Fatalf("removing %s: %v", path, err)
		}
	}
}
