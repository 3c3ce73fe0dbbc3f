package zkclient_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkserver"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestClientConformance runs one sequence of operations through zkclient
// against real ZooKeeper 3.8 and against zkserver and requires the same
// transcript: results, error codes, the deterministic Stat fields (zxids
// by rank, session ids by name), watch events in the order each watch got
// them, and the number of notifications the server sent. Where the
// package's shared server is zkserver (ZKTEST_SERVER=zkserver, or no
// ZooKeeper installed), a real ZooKeeper is started for this test (skipped
// without Java, as zktest does).
func TestClientConformance(t *testing.T) {
	checkLeaks(t)
	zktest.SkipOrFail(t, sharedErr)
	realAddr := shared.Addr(0)
	if shared.Embedded() {
		realAddr = zktest.StartT(t, zktest.Options{RealZooKeeper: true}).Addr(0)
	}
	emb := zkserver.NewServer(zkserver.Options{})
	if err := emb.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)

	base := "/zkclient-conformance-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	got := map[string][]string{}
	for _, tg := range []struct{ name, addr string }{{"zookeeper", realAddr}, {"zkserver", emb.Addr()}} {
		r := &confRec{base: base, sess: map[int64]string{}}
		ok := t.Run(tg.name, func(t *testing.T) { conformanceBody(t, r, tg.addr, base) })
		if !ok {
			t.Fatalf("%s transcript so far:\n%s", tg.name, strings.Join(r.normalized(), "\n"))
		}
		got[tg.name] = r.normalized()
	}
	want, have := got["zookeeper"], got["zkserver"]
	unexplained := len(want) != len(have)
	for i := range min(len(want), len(have)) {
		if want[i] == have[i] {
			continue
		}
		if why, ok := confKnownDiffs[[2]string{want[i], have[i]}]; ok {
			t.Logf("known difference: zookeeper %q, zkserver %q: %s", want[i], have[i], why)
			continue
		}
		unexplained = true
	}
	if unexplained {
		t.Errorf("transcripts differ (zookeeper, then zkserver, on each line that differs):\n%s", confDiff(want, have))
	}
}

// confKnownDiffs are the differences between the transcripts this test
// accepts: a line of ZooKeeper's and the line of zkserver's in its place,
// and why.
var confKnownDiffs = map[[2]string]string{}

// confRec is a transcript being recorded.
type confRec struct {
	base  string
	lines []string
	zx    []int64
	sess  map[int64]string
}

var confZxid = regexp.MustCompile("\x00Z([0-9]+)\x00")

func (r *confRec) logf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// z is a placeholder for a zxid: transcripts compare zxids by rank.
func (r *confRec) z(v int64) string {
	r.zx = append(r.zx, v)
	return fmt.Sprintf("\x00Z%d\x00", len(r.zx)-1)
}

// p is a path relative to the test's base.
func (r *confRec) p(path string) string {
	if path == r.base {
		return "~"
	}
	if rest, ok := strings.CutPrefix(path, r.base+"/"); ok {
		return "~/" + rest
	}
	return path
}

func (r *confRec) owner(id int64) string {
	if id == 0 {
		return "0"
	}
	if n, ok := r.sess[id]; ok {
		return n
	}
	return "other"
}

func (r *confRec) stat(st zkclient.Stat) string {
	return fmt.Sprintf("{cz=%s mz=%s pz=%s v=%d cv=%d av=%d eo=%s dl=%d nc=%d}",
		r.z(st.Czxid), r.z(st.Mzxid), r.z(st.Pzxid), st.Version, st.Cversion, st.Aversion,
		r.owner(st.EphemeralOwner), st.DataLength, st.NumChildren)
}

func (r *confRec) statp(st *zkclient.Stat) string {
	if st == nil {
		return "nostat"
	}
	return r.stat(*st)
}

// confErr names an error by its code; "ok" for nil.
func confErr(err error) string {
	if err == nil {
		return "ok"
	}
	var code zkclient.Code
	if errors.As(err, &code) {
		return fmt.Sprintf("code(%d %s)", int32(code), strings.TrimPrefix(code.Error(), "zookeeper: "))
	}
	return "error(" + err.Error() + ")"
}

func confData(d []byte) string {
	if d == nil {
		return "null"
	}
	return strconv.Quote(string(d))
}

func (r *confRec) names(names []string) string {
	s := slices.Clone(names)
	for i := range s {
		s[i] = r.p(s[i])
	}
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

// normalized returns the transcript with zxid placeholders replaced by
// their rank among the distinct zxids recorded.
func (r *confRec) normalized() []string {
	uniq := slices.Clone(r.zx)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	out := make([]string, len(r.lines))
	for i, l := range r.lines {
		out[i] = confZxid.ReplaceAllStringFunc(l, func(tok string) string {
			idx, _ := strconv.Atoi(confZxid.FindStringSubmatch(tok)[1])
			rank, _ := slices.BinarySearch(uniq, r.zx[idx])
			return "z" + strconv.Itoa(rank)
		})
	}
	return out
}

// confDiff shows the lines that differ, with a few lines of context.
func confDiff(want, have []string) string {
	const context = 3
	n := max(len(want), len(have))
	line := func(v []string, i int) string {
		if i < len(v) {
			return v[i]
		}
		return "<none>"
	}
	var b strings.Builder
	last := -1
	for i := range n {
		if line(want, i) == line(have, i) {
			continue
		}
		from := max(i-context, last+1)
		if last >= 0 && from > last+1 {
			b.WriteString("   ...\n")
		}
		for j := from; j < i; j++ {
			fmt.Fprintf(&b, "   %s\n", want[j])
		}
		fmt.Fprintf(&b, "!= zookeeper: %s\n   zkserver:  %s\n", line(want, i), line(have, i))
		last = i
		for j := i + 1; j < min(n, i+1+context) && line(want, j) == line(have, j); j++ {
			fmt.Fprintf(&b, "   %s\n", want[j])
			last = j
		}
	}
	return b.String()
}

// confWatches names the watches of a transcript and drains, in a fixed
// order, what each has received.
type confWatches struct {
	r    *confRec
	c    *zkclient.Client // the watching client
	one  []confOne
	pers []confPers
	seen int64 // c's notifications when last drained
}

type confOne struct {
	name string
	w    *zkclient.Watch
	done bool
}

type confPers struct {
	name  string
	w     *zkclient.PersistentWatch
	ended bool
}

func (cw *confWatches) addOne(name string, w *zkclient.Watch) {
	if w == nil {
		cw.r.logf("  watch %s: not set", name)
		return
	}
	cw.one = append(cw.one, confOne{name: name, w: w})
}

// drain records the events the watches hold now. The caller made a round
// trip on the watching client first: ZooKeeper sends a watch's event to
// its client before any later reply (the client sees the event before the
// data that follows the change).
func (cw *confWatches) drain(ctx context.Context, what string) {
	cw.drainAs(ctx, what, false)
}

// drainUnordered is drain for a change whose events ZooKeeper sends in no
// defined order (the ephemeral nodes a closed session leaves): each
// watch's events are recorded sorted.
func (cw *confWatches) drainUnordered(ctx context.Context, what string) {
	cw.drainAs(ctx, what, true)
}

func (cw *confWatches) drainAs(ctx context.Context, what string, unordered bool) {
	n := cw.c.Notifications()
	cw.r.logf("  after %s: %d notifications", what, n-cw.seen)
	cw.seen = n
	for i := range cw.one {
		o := &cw.one[i]
		if o.done {
			continue
		}
		select {
		case ev := <-o.w.Event():
			o.done = true
			cw.r.logf("    %s: %v %s %s", o.name, ev.Type, cw.r.p(ev.Path), confEvErr(ev.Err))
		default:
		}
	}
	from := len(cw.r.lines)
	if unordered {
		defer func() { slices.Sort(cw.r.lines[from:]) }()
	}
	for i := range cw.pers {
		p := &cw.pers[i]
	events:
		for !p.ended {
			select {
			case <-p.w.Ready():
			default:
				break events
			}
			ev, err := p.w.Next(ctx)
			if err != nil {
				p.ended = true
				cw.r.logf("    %s: ended %s", p.name, confEvErr(err))
				break
			}
			cw.r.logf("    %s: %v %s %s", p.name, ev.Type, cw.r.p(ev.Path), confEvErr(ev.Err))
		}
	}
}

func confEvErr(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, zkclient.ErrWatchRemoved):
		return "(removed)"
	case errors.Is(err, zkclient.ErrSessionExpired):
		return "(expired)"
	case errors.Is(err, zkclient.ErrClosed):
		return "(closed)"
	}
	return "(" + err.Error() + ")"
}

// conformanceBody is the sequence of operations, recorded into r.
func conformanceBody(t *testing.T, r *confRec, addr, base string) {
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	connect := func(name string) *zkclient.Client {
		c, err := zkclient.Connect(ctx, []string{addr}, zkclient.WithSessionTimeout(4*time.Second))
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		r.sess[c.SessionID()] = name
		return c
	}
	c1 := connect("c1")
	defer c1.Close()
	c2 := connect("c2")
	c2open := true
	defer func() {
		if c2open {
			c2.Close()
		}
	}()
	all := zkclient.WorldACL(zkclient.PermAll)
	b := func(p string) string { return base + p }
	t.Cleanup(func() {
		a, err := zkclient.Connect(context.Background(), []string{addr})
		if err == nil {
			zktest.DeleteTree(context.Background(), a, base) // best effort, as before: ACLs may keep it out
			a.Close()
		}
	})

	// Writes record the path made, the Stat and the zxid of the reply.
	create := func(c *zkclient.Client, who, p string, data []byte, mode zkclient.CreateMode) {
		call := c.Create2Async(p, data, mode, all)
		res, err := call.Wait(ctx)
		if err != nil {
			r.logf("%s create2 %s mode=%d: %s", who, r.p(p), mode, confErr(err))
			return
		}
		r.logf("%s create2 %s mode=%d: %s %s zxid=%s", who, r.p(p), mode, r.p(res.Path), r.stat(res.Stat), r.z(call.Zxid()))
	}
	createPlain := func(c *zkclient.Client, who, p string, data []byte, mode zkclient.CreateMode) string {
		call := c.CreateAsync(p, data, mode, all)
		res, err := call.Wait(ctx)
		if err != nil {
			r.logf("%s create %s mode=%d: %s", who, r.p(p), mode, confErr(err))
			return ""
		}
		r.logf("%s create %s mode=%d: %s %s zxid=%s", who, r.p(p), mode, r.p(res.Path), confStatIfAny(r, res.Stat), r.z(call.Zxid()))
		return res.Path
	}
	set := func(c *zkclient.Client, who, p string, data []byte, version int32) {
		call := c.SetAsync(p, data, version)
		st, err := call.Wait(ctx)
		if err != nil {
			r.logf("%s set %s v=%d: %s", who, r.p(p), version, confErr(err))
			return
		}
		r.logf("%s set %s v=%d: %s zxid=%s", who, r.p(p), version, r.stat(st), r.z(call.Zxid()))
	}
	del := func(c *zkclient.Client, who, p string, version int32) {
		call := c.DeleteAsync(p, version)
		_, err := call.Wait(ctx)
		if err != nil {
			r.logf("%s delete %s v=%d: %s", who, r.p(p), version, confErr(err))
			return
		}
		r.logf("%s delete %s v=%d: ok zxid=%s", who, r.p(p), version, r.z(call.Zxid()))
	}
	get := func(c *zkclient.Client, who, p string) {
		d, st, err := c.Get(ctx, p)
		if err != nil {
			r.logf("%s get %s: %s", who, r.p(p), confErr(err))
			return
		}
		r.logf("%s get %s: %s %s", who, r.p(p), confData(d), r.stat(st))
	}
	exists := func(c *zkclient.Client, who, p string) {
		st, ok, err := c.Exists(ctx, p)
		if err != nil || !ok {
			r.logf("%s exists %s: %v %s", who, r.p(p), ok, confErr(err))
			return
		}
		r.logf("%s exists %s: true %s", who, r.p(p), r.stat(st))
	}
	children := func(c *zkclient.Client, who, p string) {
		names, st, err := c.Children(ctx, p)
		if err != nil {
			r.logf("%s children %s: %s", who, r.p(p), confErr(err))
			return
		}
		r.logf("%s children %s: %s %s", who, r.p(p), r.names(names), r.stat(st))
	}
	check := func(c *zkclient.Client, who, p string, typ zkclient.WatcherType) {
		r.logf("%s checkWatches %s type=%d: %s", who, r.p(p), typ, confErr(c.CheckWatches(ctx, p, typ)))
	}
	// barrier is a round trip on c1: what the server sent c1 before it
	// is in by the time it returns.
	barrier := func() {
		if _, _, err := c1.Exists(ctx, "/"); err != nil {
			t.Fatalf("barrier: %v", err)
		}
	}
	ws := &confWatches{r: r, c: c1, seen: c1.Notifications()}
	// existsW, getW and childrenW set a one-shot watch of c1's on p and
	// follow it as name, recording the reply.
	existsW := func(name, p string) {
		_, ok, w, err := c1.ExistsW(ctx, p)
		r.logf("c1 existsW %s: %v %s", r.p(p), ok, confErr(err))
		ws.addOne(name, w)
	}
	getW := func(name, p string) {
		_, st, w, err := c1.GetW(ctx, p)
		r.logf("c1 getW %s: %s %s", r.p(p), r.stat(st), confErr(err))
		ws.addOne(name, w)
	}
	childrenW := func(name, p string) {
		_, st, w, err := c1.ChildrenW(ctx, p)
		r.logf("c1 childrenW %s: %s %s", r.p(p), r.stat(st), confErr(err))
		ws.addOne(name, w)
	}

	r.logf("# nodes, data, versions")
	createPlain(c1, "c1", base, nil, zkclient.Persistent)
	rw, err := c1.AddWatch(ctx, base, true)
	r.logf("c1 addWatch recursive ~: %s", confErr(err))
	if rw != nil {
		ws.pers = append(ws.pers, confPers{name: "recursive(~)", w: rw})
	}
	create(c1, "c1", b("/n"), []byte("v1"), zkclient.Persistent)
	create(c1, "c1", b("/n"), nil, zkclient.Persistent)
	create(c1, "c1", b("/missing/x"), nil, zkclient.Persistent)
	create(c1, "c1", b("/null"), nil, zkclient.Persistent)
	create(c1, "c1", b("/empty"), []byte{}, zkclient.Persistent)
	get(c1, "c1", b("/null"))
	get(c1, "c1", b("/empty"))
	get(c1, "c1", b("/n"))
	set(c1, "c1", b("/n"), []byte("v2"), 0)
	set(c1, "c1", b("/n"), []byte("v3"), 0)
	set(c1, "c1", b("/null"), []byte{}, -1)
	get(c1, "c1", b("/null"))
	set(c1, "c1", b("/empty"), nil, -1)
	get(c1, "c1", b("/empty"))
	set(c1, "c1", b("/none"), nil, -1)
	del(c1, "c1", b("/n"), 5)
	del(c1, "c1", b("/none"), -1)
	exists(c1, "c1", b("/n"))
	exists(c1, "c1", b("/none"))
	get(c1, "c1", b("/none"))
	children(c1, "c1", b("/none"))
	acl, st, err := c1.GetACL(ctx, b("/n"))
	r.logf("c1 getACL ~/n: %v %s %s", acl, r.stat(st), confErr(err))
	st, err = c1.SetACL(ctx, b("/n"), zkclient.WorldACL(zkclient.PermRead|zkclient.PermWrite|zkclient.PermCreate|zkclient.PermDelete|zkclient.PermAdmin), 0)
	r.logf("c1 setACL ~/n v=0: %s %s", r.stat(st), confErr(err))
	_, err = c1.SetACL(ctx, b("/n"), all, 0)
	r.logf("c1 setACL ~/n v=0 again: %s", confErr(err))
	_, _, err = c1.GetACL(ctx, b("/none"))
	r.logf("c1 getACL ~/none: %s", confErr(err))
	r.logf("c1 sync ~/n: %s", confErr(c1.Sync(ctx, b("/n"))))
	ws.drain(ctx, "the writes of c1")

	r.logf("# sequential nodes")
	createPlain(c1, "c1", b("/seq"), nil, zkclient.Persistent)
	createPlain(c1, "c1", b("/seq/a-"), nil, zkclient.PersistentSequential)
	createPlain(c1, "c1", b("/seq/a-"), []byte("x"), zkclient.PersistentSequential)
	createPlain(c1, "c1", b("/seq/plain"), nil, zkclient.Persistent)
	del(c1, "c1", b("/seq/plain"), -1)
	createPlain(c1, "c1", b("/seq/e-"), nil, zkclient.EphemeralSequential)
	createPlain(c2, "c2", b("/seq/e-"), nil, zkclient.EphemeralSequential)
	createPlain(c1, "c1", b("/seq/"), nil, zkclient.PersistentSequential)
	create(c1, "c1", b("/seq/s2-"), nil, zkclient.PersistentSequential)
	children(c1, "c1", b("/seq"))
	del(c1, "c1", b("/seq"), -1)
	barrier()
	ws.drain(ctx, "the sequential creates")

	r.logf("# ephemeral nodes")
	create(c1, "c1", b("/eph1"), nil, zkclient.Ephemeral)
	create(c2, "c2", b("/eph2"), []byte("2"), zkclient.Ephemeral)
	create(c1, "c1", b("/eph1/kid"), nil, zkclient.Persistent)
	create(c1, "c1", b("/e"), nil, zkclient.Persistent)
	create(c1, "c1", b("/e/x"), nil, zkclient.Ephemeral)
	for _, pre := range []string{base, b("/eph"), b("/e"), b("/e/"), "/", b("/none")} {
		eph, err := c1.Ephemerals(ctx, pre)
		r.logf("c1 getEphemerals %s: %s %s", r.p(pre), r.names(eph), confErr(err))
	}
	eph, err := c2.Ephemerals(ctx, base)
	r.logf("c2 getEphemerals ~: %s %s", r.names(eph), confErr(err))
	for _, p := range []string{base, b("/e"), b("/e/x"), b("/none")} {
		n, err := c1.AllChildrenNumber(ctx, p)
		r.logf("c1 getAllChildrenNumber %s: %d %s", r.p(p), n, confErr(err))
	}
	del(c1, "c1", b("/e"), -1)
	barrier()
	ws.drain(ctx, "the ephemeral creates")

	r.logf("# multi")
	multi := func(who string, c *zkclient.Client, ops ...zkclient.Op) {
		call := c.MultiAsync(ops...)
		res, err := call.Wait(ctx)
		if err != nil {
			r.logf("%s multi: %s", who, confErr(err))
			return
		}
		failed := false
		for _, o := range res {
			failed = failed || o.Err != nil
		}
		zx := "-"
		if !failed {
			zx = r.z(call.Zxid())
		}
		r.logf("%s multi: %d results, zxid=%s", who, len(res), zx)
		for i, o := range res {
			r.logf("  %d: path=%s %s %s", i, r.p(o.Path), r.statp(o.Stat), confErr(o.Err))
		}
	}
	multi("c1", c1,
		c1.CreateOp(b("/m"), []byte("x"), zkclient.Persistent, all),
		c1.CreateOp(b("/m/q-"), nil, zkclient.PersistentSequential, all),
		c1.CreateOp(b("/m/e"), nil, zkclient.Ephemeral, all),
		c1.SetOp(b("/m"), []byte("y"), 0),
		c1.CheckOp(b("/m"), 1),
		c1.DeleteOp(b("/m/e"), -1))
	multi("c1", c1,
		c1.SetOp(b("/m"), []byte("z"), -1),
		c1.CheckOp(b("/m"), 0),
		c1.DeleteOp(b("/m/q-0000000000"), -1))
	multi("c1", c1,
		c1.DeleteOp(b("/nothing"), -1),
		c1.CreateOp(b("/m2"), nil, zkclient.Persistent, all))
	multi("c1", c1,
		c1.CreateOp(b("/m3"), nil, zkclient.Persistent, all),
		c1.CreateOp(b("/m3"), nil, zkclient.Persistent, all))
	multi("c1", c1)
	get(c1, "c1", b("/m"))
	exists(c1, "c1", b("/m2"))
	exists(c1, "c1", b("/m3"))
	rr, err := c1.MultiRead(ctx, c1.GetOp(b("/m")), c1.ChildrenOp(b("/m")), c1.GetOp(b("/none")), c1.ChildrenOp(b("/none")), c1.GetOp(b("/null")))
	r.logf("c1 multiRead: %d results %s", len(rr), confErr(err))
	for i, x := range rr {
		var kids string
		if x.Children != nil {
			kids = r.names(x.Children)
		}
		r.logf("  %d: data=%s %s children=%s %s", i, confData(x.Data), r.statp(x.Stat), kids, confErr(x.Err))
	}
	ws.drain(ctx, "the multis")

	r.logf("# one-shot watches")
	existsW("exists1(~/w)", b("/w"))
	existsW("exists2(~/w)", b("/w"))
	check(c1, "c1", b("/w"), zkclient.WatcherData)
	check(c1, "c1", b("/w"), zkclient.WatcherChildren)
	check(c1, "c1", b("/w"), zkclient.WatcherAny)
	// c2 has no watch at all: ZooKeeper 3.8 answers checkWatches from
	// whether anyone watches the path (see below).
	check(c2, "c2", b("/w"), zkclient.WatcherData)
	check(c2, "c2", b("/w"), zkclient.WatcherChildren)
	check(c2, "c2", b("/w"), zkclient.WatcherAny)
	// c1's recursive watch on ~ covers ~/n: not a watch on ~/n itself.
	check(c1, "c1", b("/n"), zkclient.WatcherAny)
	check(c2, "c2", base, zkclient.WatcherAny)
	create(c2, "c2", b("/w"), []byte("a"), zkclient.Persistent)
	barrier()
	ws.drain(ctx, "c2 created ~/w")
	for i := range 2 {
		getW(fmt.Sprintf("get%d(~/w)", i+1), b("/w"))
	}
	childrenW("children1(~/w)", b("/w"))
	existsW("exists3(~/w)", b("/w"))
	_, _, w, err := c1.GetW(ctx, b("/none"))
	r.logf("c1 getW ~/none: %v %s", w != nil, confErr(err))
	_, _, w, err = c1.ChildrenW(ctx, b("/none"))
	r.logf("c1 childrenW ~/none: %v %s", w != nil, confErr(err))
	check(c1, "c1", b("/none"), zkclient.WatcherAny)
	set(c2, "c2", b("/w"), []byte("b"), -1)
	barrier()
	ws.drain(ctx, "c2 set ~/w")
	create(c2, "c2", b("/w/c"), nil, zkclient.Persistent)
	barrier()
	ws.drain(ctx, "c2 created ~/w/c")
	getW("get(~/w/c)", b("/w/c"))
	childrenW("children(~/w/c)", b("/w/c"))
	childrenW("children2(~/w)", b("/w"))
	del(c2, "c2", b("/w/c"), -1)
	barrier()
	ws.drain(ctx, "c2 deleted ~/w/c")
	getW("get3(~/w)", b("/w"))
	childrenW("children3(~/w)", b("/w"))
	del(c2, "c2", b("/w"), -1)
	barrier()
	ws.drain(ctx, "c2 deleted ~/w")

	r.logf("# a watch fired by the watching session's own write")
	_, _, w, err = c1.GetW(ctx, b("/n"))
	r.logf("c1 getW ~/n: %s", confErr(err))
	set(c1, "c1", b("/n"), []byte("own"), -1)
	select {
	case ev := <-w.Event():
		r.logf("  the event was in when the write returned: %v %s", ev.Type, r.p(ev.Path))
	default:
		r.logf("  the event was not in when the write returned")
		ws.addOne("own(~/n)", w)
	}
	barrier()
	ws.drain(ctx, "c1 set ~/n")

	r.logf("# persistent watch")
	pw, err := c1.AddWatch(ctx, b("/p"), false)
	r.logf("c1 addWatch ~/p: %s", confErr(err))
	if pw != nil {
		ws.pers = append(ws.pers, confPers{name: "persistent(~/p)", w: pw})
	}
	check(c1, "c1", b("/p"), zkclient.WatcherData)
	check(c1, "c1", b("/p"), zkclient.WatcherChildren)
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"c2 created ~/p", func() { create(c2, "c2", b("/p"), nil, zkclient.Persistent) }},
		{"c2 set ~/p", func() { set(c2, "c2", b("/p"), []byte("p"), -1) }},
		{"c2 created ~/p/k", func() { create(c2, "c2", b("/p/k"), nil, zkclient.Persistent) }},
		{"c2 set ~/p/k", func() { set(c2, "c2", b("/p/k"), []byte("k"), -1) }},
		{"c2 deleted ~/p/k", func() { del(c2, "c2", b("/p/k"), -1) }},
		{"c2 deleted ~/p", func() { del(c2, "c2", b("/p"), -1) }},
		{"c2 created ~/p again", func() { create(c2, "c2", b("/p"), nil, zkclient.Persistent) }},
	} {
		step.do()
		barrier()
		ws.drain(ctx, step.what)
	}

	r.logf("# a one-shot watch set on a path with a persistent one")
	pq, err := c1.AddWatch(ctx, b("/p"), false)
	r.logf("c1 addWatch ~/p again: %s", confErr(err))
	if pq != nil {
		ws.pers = append(ws.pers, confPers{name: "persistent2(~/p)", w: pq})
	}
	_, _, w, err = c1.GetW(ctx, b("/p"))
	r.logf("c1 getW ~/p: %s", confErr(err))
	ws.addOne("get(~/p)", w)
	set(c2, "c2", b("/p"), []byte("1"), -1)
	barrier()
	ws.drain(ctx, "c2 set ~/p")
	set(c2, "c2", b("/p"), []byte("2"), -1)
	barrier()
	ws.drain(ctx, "c2 set ~/p again")
	check(c1, "c1", b("/p"), zkclient.WatcherData)

	r.logf("# removing watches")
	create(c2, "c2", b("/r"), nil, zkclient.Persistent)
	barrier()
	ws.drain(ctx, "c2 created ~/r")
	_, _, wa, err := c1.GetW(ctx, b("/r"))
	r.logf("c1 getW ~/r: %s", confErr(err))
	_, _, wb, err := c1.GetW(ctx, b("/r"))
	r.logf("c1 getW ~/r: %s", confErr(err))
	_, _, wc, err := c1.ChildrenW(ctx, b("/r"))
	r.logf("c1 childrenW ~/r: %s", confErr(err))
	_, _, wm, err := c1.ExistsW(ctx, b("/rmissing"))
	r.logf("c1 existsW ~/rmissing: %s", confErr(err))
	r.logf("c1 remove get1(~/r): %s", confErr(wa.Remove(ctx)))
	check(c1, "c1", b("/r"), zkclient.WatcherData)
	r.logf("c1 remove get2(~/r): %s", confErr(wb.Remove(ctx)))
	check(c1, "c1", b("/r"), zkclient.WatcherData)
	check(c1, "c1", b("/r"), zkclient.WatcherChildren)
	r.logf("c1 remove children(~/r): %s", confErr(wc.Remove(ctx)))
	check(c1, "c1", b("/r"), zkclient.WatcherChildren)
	check(c1, "c1", b("/r"), zkclient.WatcherAny)
	check(c1, "c1", b("/rmissing"), zkclient.WatcherData)
	r.logf("c1 remove exists(~/rmissing): %s", confErr(wm.Remove(ctx)))
	check(c1, "c1", b("/rmissing"), zkclient.WatcherData)
	ws.addOne("removed get1(~/r)", wa)
	ws.addOne("removed get2(~/r)", wb)
	ws.addOne("removed children(~/r)", wc)
	ws.addOne("removed exists(~/rmissing)", wm)
	if pw != nil {
		r.logf("c1 remove persistent(~/p): %s", confErr(pw.Remove(ctx)))
		check(c1, "c1", b("/p"), zkclient.WatcherAny)
	}
	if pq != nil {
		r.logf("c1 remove persistent2(~/p): %s", confErr(pq.Remove(ctx)))
		check(c1, "c1", b("/p"), zkclient.WatcherAny)
	}
	set(c2, "c2", b("/r"), []byte("x"), -1)
	create(c2, "c2", b("/r/k"), nil, zkclient.Persistent)
	create(c2, "c2", b("/rmissing"), nil, zkclient.Persistent)
	set(c2, "c2", b("/p"), []byte("3"), -1)
	barrier()
	ws.drain(ctx, "changes to the nodes of removed watches")

	r.logf("# containers and TTL nodes")
	createPlain(c1, "c1", b("/ctr"), nil, zkclient.Container)
	_, err = c1.CreateTTL(ctx, b("/ttl"), nil, zkclient.PersistentWithTTL, all, time.Minute)
	r.logf("c1 createTTL ~/ttl: %s", confErr(err))
	barrier()
	ws.drain(ctx, "the container")

	r.logf("# session end")
	ids, err := c1.WhoAmI(ctx)
	r.logf("c1 whoAmI: %d identities, %s", len(ids), confErr(err))
	for _, id := range ids {
		r.logf("  %s", id.Scheme)
	}
	_, _, w, err = c1.GetW(ctx, b("/eph2"))
	r.logf("c1 getW ~/eph2: %s", confErr(err))
	ws.addOne("get(~/eph2)", w)
	r.logf("c2 close: %s", confErr(c2.Close()))
	c2open = false
	barrier()
	ws.drainUnordered(ctx, "c2 closed")
	exists(c1, "c1", b("/eph2"))
	children(c1, "c1", base)
	n, err := c1.AllChildrenNumber(ctx, base)
	r.logf("c1 getAllChildrenNumber ~: %d %s", n, confErr(err))
	if rw != nil {
		r.logf("c1 remove recursive(~): %s", confErr(rw.Remove(ctx)))
		check(c1, "c1", base, zkclient.WatcherAny)
	}
	ws.drain(ctx, "the recursive watch was removed")
}

// confStatIfAny formats a create's Stat when the server sent one (create
// answers a Container with one, a plain create without).
func confStatIfAny(r *confRec, st zkclient.Stat) string {
	if st == (zkclient.Stat{}) {
		return "nostat"
	}
	return r.stat(st)
}
