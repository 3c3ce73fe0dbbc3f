package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The properties of the Cache and the PersistentNode.
const (
	// PropCache: a Cache's event stream broke its consistency model (see
	// cacheCheck).
	PropCache = "cache"
	// PropConverge: after the writer stopped, the cache's copy did not
	// become the server's tree within the bound.
	PropConverge = "converge"
	// PropNode: after the heal, a PersistentNode's node was not there
	// again, with its data, on one of its sessions, within the bound.
	PropNode = "pnode"
)

// nodeState is a node's state as the cache events and snapshots give it.
type nodeState struct {
	data         string
	czxid, mzxid int64
	version      int32
}

func (s nodeState) String() string {
	return fmt.Sprintf("%q czxid=0x%x mzxid=0x%x version=%d", s.data, s.czxid, s.mzxid, s.version)
}

func stateOf(e Event) nodeState { return nodeState{e.Data, e.Czxid, e.Mzxid, e.Version} }

// attempt is one write of the cache writer.
type attempt struct {
	op, outcome string
	state       nodeState // the node after it, if acknowledged
}

// applied tells whether the write may have changed the node: it was
// acknowledged, or its answer was lost. Writes the server refused (no
// node, node exists, not empty) changed nothing.
func (a attempt) applied() (certain, maybe bool) {
	switch a.outcome {
	case outcomeOK:
		return true, true
	case outcomeNoNode, outcomeExists, outcomeNotEmpty:
		return false, false
	}
	return false, true
}

// cacheRun is one Cache as the checker replays it.
type cacheRun struct {
	id       int32
	client   int
	gen      int32
	root     string
	copy     map[string]nodeState // the events so far, applied to an empty tree
	newest   map[string]int64     // per path, the highest Czxid reported
	reported map[string]map[[2]int64]bool
	init     bool
	pending  map[string][]treeNode // a snapshot being recorded, by Op
	ended    bool
}

// CacheCounts are the cache workloads' figures.
type CacheCounts struct {
	Caches      int           // Caches made (one per session of the follower)
	Events      int           // events they reported
	Writes      int           // the writer's writes
	Unconfirmed int           // writes whose answer was lost (applied or not)
	Converged   time.Duration // from the writer's stop (or the heal, if later) to the final snapshot
}

// cacheCheck replays each Cache's recorded events on an empty tree (the
// stream begins with the initial load) and checks what the Cache documents:
//
//   - The stream is the copy: at each snapshot of the copy (when the cache
//     stopped, and the final one), the replay is exactly the copy.
//   - Before CacheInitialized there are only CacheCreated events, and it
//     comes once.
//   - The copy is always a tree: a node is created only while its parent
//     is in the copy, deleted only once its children are gone from it; a
//     node is created only while absent, changed or deleted only while
//     present; a deletion reports the state the copy held.
//   - Per node, versions only move forward: CacheChanged keeps the Czxid
//     with a higher Mzxid and Version; a node created again has a higher
//     Czxid than any before; no state (Czxid, Mzxid) is reported twice.
//   - States are real: every state created or changed is one a write of
//     the writer produced: the writer's data is unique to each write, the
//     write was acknowledged with exactly that Stat, or its answer was
//     lost; a write the server refused never shows.
//   - Convergence: once the writer stopped after the heal, the copy equals
//     the server's tree (the same nodes with the same data, Czxid, Mzxid
//     and Version) within ProgressBound: the final snapshot says so.
func cacheCheck(events []Event, cfg Config) ([]Violation, CacheCounts) {
	var out []Violation
	var counts CacheCounts
	writes := map[string]map[string][]attempt{} // path → data → writes
	healed, quiet := time.Duration(-1), time.Duration(-1)
	for _, e := range events {
		switch e.Kind {
		case KindTreeWrite:
			counts.Writes++
			if certain, maybe := (attempt{outcome: e.ErrKind}).applied(); maybe && !certain {
				counts.Unconfirmed++
			}
			if e.Op == OpTreeDelete {
				continue
			}
			if writes[e.Path] == nil {
				writes[e.Path] = map[string][]attempt{}
			}
			writes[e.Path][e.Data] = append(writes[e.Path][e.Data], attempt{e.Op, e.ErrKind, stateOf(e)})
		case KindHealed:
			healed = e.At
		case KindQuiet:
			if e.Res == ResCache {
				quiet = e.At
			}
		}
	}
	runs := map[int32]*cacheRun{}
	finals := 0
	for _, e := range events {
		var r *cacheRun
		switch e.Kind {
		case KindCacheStart:
			runs[e.Holding] = &cacheRun{id: e.Holding, client: e.Client, gen: e.Gen, root: e.Path,
				copy: map[string]nodeState{}, newest: map[string]int64{}, reported: map[string]map[[2]int64]bool{},
				pending: map[string][]treeNode{}}
			counts.Caches++
			continue
		case KindCacheEvent, KindCopyNode, KindSnapshot:
			if r = runs[e.Holding]; r == nil {
				out = append(out, Violation{Property: PropHarness, At: e.At, Res: ResCache, Clients: []int{e.Client},
					Msg: fmt.Sprintf("an event of cache#%d, which never started: %v", e.Holding, e)})
				continue
			}
		default:
			continue
		}
		bad := func(prop, format string, args ...any) {
			out = append(out, Violation{Property: prop, At: e.At, Res: ResCache, Clients: []int{r.client}, Holdings: []int32{r.id},
				Msg: fmt.Sprintf("cache#%d (c%d/%d): ", r.id, r.client, r.gen) + fmt.Sprintf(format, args...)})
		}
		switch e.Kind {
		case KindCacheEvent:
			counts.Events++
			if r.ended {
				bad(PropCache, "event %s %s after its stream ended", e.Op, e.Path)
				continue
			}
			if msg := r.apply(e, writes); msg != "" {
				bad(PropCache, "%s", msg)
			}
		case KindCopyNode:
			if r.ended {
				continue // reported with its KindSnapshot
			}
		case KindSnapshot:
			if r.ended {
				bad(PropHarness, "a %s snapshot after the cache's end snapshot", e.Op)
				continue
			}
		}
		switch e.Kind {
		case KindCopyNode:
			r.pending[e.Op] = append(r.pending[e.Op], treeNode{e.Path, e.Data, e.Czxid, e.Mzxid, e.Version})
		case KindSnapshot:
			cp, tree := r.pending["cache"], r.pending["server"]
			clear(r.pending)
			if !r.init {
				bad(PropCache, "no CacheInitialized in its stream")
			}
			if d := diffTrees("the events replayed", r.replay(), "the copy", cp); d != "" {
				bad(PropCache, "its stream is not its copy at the %s snapshot: %s", e.Op, d)
			}
			if e.Op == "end" {
				r.ended = true
				continue
			}
			finals++
			from := max(healed, quiet)
			counts.Converged = e.At - from
			if d := diffTrees("the copy", cp, "the server", tree); d != "" {
				bad(PropConverge, "the copy is not the server's tree %v after the writer stopped: %s", (e.At - from).Round(time.Millisecond), d)
			} else if e.At-from > cfg.ProgressBound {
				bad(PropConverge, "the copy became the server's tree only %v after the writer stopped, beyond the bound of %v", (e.At - from).Round(time.Millisecond), cfg.ProgressBound)
			}
		}
	}
	if counts.Writes > 0 && healed >= 0 && finals != 1 {
		out = append(out, Violation{Property: PropConverge, At: healed, Res: ResCache,
			Msg: fmt.Sprintf("%d final comparisons of the cache with the server after the heal, want 1 (the writer stopped: %v)", finals, quiet >= 0)})
	}
	return out, counts
}

// apply applies one event to the replay, and says what is wrong with it.
func (r *cacheRun) apply(e Event, writes map[string]map[string][]attempt) string {
	st := stateOf(e)
	cur, present := r.copy[e.Path]
	if e.Op == "initialized" {
		if r.init {
			return "CacheInitialized reported twice"
		}
		r.init = true
		return ""
	}
	if e.Path != r.root && !strings.HasPrefix(e.Path, r.root+"/") {
		return fmt.Sprintf("%s %s, outside its path %s", e.Op, e.Path, r.root)
	}
	early := ""
	if !r.init && e.Op != "created" {
		early = fmt.Sprintf("%s %s before CacheInitialized: the initial load reports creations only", e.Op, e.Path)
	}
	// A wrong event is applied all the same, as the cache applied it to
	// its copy: one fault, one violation.
	switch e.Op {
	case "created", "changed":
		msg := ""
		switch {
		case r.reported[e.Path][[2]int64{st.czxid, st.mzxid}]:
			msg = fmt.Sprintf("%s %s reports the state czxid=0x%x mzxid=0x%x a second time", e.Op, e.Path, st.czxid, st.mzxid)
		case e.Op == "created" && present:
			msg = fmt.Sprintf("created %s (%v) while the copy holds it (%v)", e.Path, st, cur)
		case e.Op == "created" && e.Path != r.root && !r.has(parentOf(e.Path)):
			msg = fmt.Sprintf("created %s while its parent is not in the copy", e.Path)
		case e.Op == "created" && r.newest[e.Path] != 0 && st.czxid <= r.newest[e.Path]:
			msg = fmt.Sprintf("created %s with czxid 0x%x, not above the incarnation 0x%x reported before", e.Path, st.czxid, r.newest[e.Path])
		case e.Op == "changed" && !present:
			msg = fmt.Sprintf("changed %s, which the copy does not hold", e.Path)
		case e.Op == "changed" && (st.czxid != cur.czxid || st.mzxid <= cur.mzxid || st.version <= cur.version):
			msg = fmt.Sprintf("changed %s to %v, not a newer version of %v", e.Path, st, cur)
		default:
			if why := real(writes, e.Path, st); why != "" {
				msg = fmt.Sprintf("%s %s: %s", e.Op, e.Path, why)
			}
		}
		if r.reported[e.Path] == nil {
			r.reported[e.Path] = map[[2]int64]bool{}
		}
		r.reported[e.Path][[2]int64{st.czxid, st.mzxid}] = true
		r.newest[e.Path] = max(r.newest[e.Path], st.czxid)
		r.copy[e.Path] = st
		return cmp.Or(early, msg)
	case "deleted":
		msg := ""
		switch {
		case !present:
			msg = fmt.Sprintf("deleted %s, which the copy does not hold", e.Path)
		case st != cur:
			msg = fmt.Sprintf("deleted %s reporting %v, but the copy held %v", e.Path, st, cur)
		}
		for p := range r.copy {
			if msg == "" && strings.HasPrefix(p, e.Path+"/") {
				msg = fmt.Sprintf("deleted %s while the copy still holds %s below it", e.Path, p)
			}
		}
		delete(r.copy, e.Path)
		return cmp.Or(early, msg)
	}
	return fmt.Sprintf("an event of unknown type %q for %s", e.Op, e.Path)
}

func (r *cacheRun) has(p string) bool { _, ok := r.copy[p]; return ok }

// replay returns the replayed copy, sorted by path.
func (r *cacheRun) replay() []treeNode {
	out := make([]treeNode, 0, len(r.copy))
	for p, s := range r.copy {
		out = append(out, treeNode{p, s.data, s.czxid, s.mzxid, s.version})
	}
	slices.SortFunc(out, func(a, b treeNode) int { return strings.Compare(a.path, b.path) })
	return out
}

// real tells whether a state of path is one the writer's writes produced
// ("" if so).
func real(writes map[string]map[string][]attempt, path string, st nodeState) string {
	as := writes[path][st.data]
	if len(as) == 0 {
		return fmt.Sprintf("the state %v, whose data no write to %s had", st, path)
	}
	var why []string
	for _, a := range as {
		certain, maybe := a.applied()
		switch {
		case certain && a.state == st:
			return ""
		case certain:
			why = append(why, fmt.Sprintf("%s acknowledged with %v", a.op, a.state))
		case maybe:
			return "" // its answer was lost: it may have made this state
		default:
			why = append(why, fmt.Sprintf("%s refused (%s)", a.op, a.outcome))
		}
	}
	return fmt.Sprintf("the state %v, which no write made: its data was written by %s", st, strings.Join(why, ", "))
}

// diffTrees describes how two sorted trees differ ("" if they do not).
func diffTrees(aName string, a []treeNode, bName string, b []treeNode) string {
	if slices.Equal(a, b) {
		return ""
	}
	index := func(l []treeNode) map[string]treeNode {
		m := make(map[string]treeNode, len(l))
		for _, n := range l {
			m[n.path] = n
		}
		return m
	}
	ma, mb := index(a), index(b)
	var diffs []string
	for _, n := range a {
		switch o, ok := mb[n.path]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s has %s, %s not", aName, n.path, bName))
		case o != n:
			diffs = append(diffs, fmt.Sprintf("%s: %s %v, %s %v", n.path, aName, stateOfNode(n), bName, stateOfNode(o)))
		}
	}
	for _, n := range b {
		if _, ok := ma[n.path]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s has %s, %s not", bName, n.path, aName))
		}
	}
	if len(diffs) == 0 {
		return fmt.Sprintf("%s lists a node twice", aName) // equal maps, unequal lists
	}
	more := ""
	if len(diffs) > 5 {
		more = fmt.Sprintf(" (and %d more)", len(diffs)-5)
		diffs = diffs[:5]
	}
	return fmt.Sprintf("%d nodes vs %d: %s%s", len(a), len(b), strings.Join(diffs, "; "), more)
}

func stateOfNode(n treeNode) nodeState { return nodeState{n.data, n.czxid, n.mzxid, n.version} }

// parentOf returns the parent's path of p.
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// NodeCounts are the PersistentNode workloads' figures.
type NodeCounts struct {
	Sets        int           // creations and SetData calls
	Unconfirmed int           // those that returned an error (their data may or may not be the node's)
	Deletes     int           // deletions of another keeper's node that found it
	Renewals    int           // sessions WithSessionRenewal made
	Back        time.Duration // the slowest node's return after the heal
}

// NodeVerdict judges what the server held at a PersistentNode's path after
// the heal (seen, a KindNodeSeen) against the history before it: "" if it
// is right, else what is wrong. The node must exist, be owned by one of
// the sessions the PersistentNode was kept on, and hold the data of its
// last acknowledged creation or SetData, or of one made after that which
// returned an error (its write may or may not have been applied, and a
// re-creation carries it).
func NodeVerdict(before []Event, path string, seen Event) string {
	data := map[string]bool{}
	var last []string
	sessions := map[int64]bool{}
	for _, e := range before {
		if e.Path != path {
			continue
		}
		switch e.Kind {
		case KindNodeSet:
			if e.Accepted {
				clear(data)
				last = last[:0]
			}
			data[e.Data] = true
			last = append(last, fmt.Sprintf("%q", e.Data))
		case KindNodeSession:
			sessions[e.Session] = true
		}
	}
	switch {
	case len(data) == 0:
		return "its PersistentNode was never made"
	case !seen.Accepted:
		return fmt.Sprintf("the node is missing (%s)", seen.Detail)
	case !data[seen.Data]:
		return fmt.Sprintf("the node holds %q, not %s", seen.Data, strings.Join(last, " or "))
	case !sessions[seen.Session]:
		return fmt.Sprintf("the node is owned by session 0x%x, none of those its PersistentNode was kept on", seen.Session)
	}
	return ""
}

// nodeCheck checks that every PersistentNode was back after the heal, as
// NodeVerdict wants it, within ProgressBound.
func nodeCheck(events []Event, cfg Config) ([]Violation, NodeCounts) {
	var out []Violation
	var counts NodeCounts
	healed, ok := time.Duration(0), false
	var paths []string
	owner := map[string]int{}
	seen := map[string]int{} // path → index of the last KindNodeSeen after the heal
	for i, e := range events {
		switch e.Kind {
		case KindHealed:
			healed, ok = e.At, true
		case KindNodeSet:
			counts.Sets++
			if !e.Accepted {
				counts.Unconfirmed++
			}
		case KindNodeDelete:
			if e.Accepted {
				counts.Deletes++
			}
		case KindNodeSession:
			if e.Detail == "renewed" {
				counts.Renewals++
			}
		case KindNodeSeen:
			if ok {
				seen[e.Path] = i
			}
		}
		if e.Kind == KindNodeSet || e.Kind == KindNodeSession {
			if _, known := owner[e.Path]; !known {
				owner[e.Path] = e.Client
				paths = append(paths, e.Path)
			}
		}
	}
	if !ok {
		return nil, counts // progress reports the missing heal
	}
	for _, p := range paths {
		i, found := seen[p]
		if !found {
			out = append(out, Violation{Property: PropNode, At: healed, Res: ResNode, Clients: []int{owner[p]},
				Msg: fmt.Sprintf("the PersistentNode %s was never looked at after the heal", p)})
			continue
		}
		e := events[i]
		back := e.At - healed
		counts.Back = max(counts.Back, back)
		if msg := NodeVerdict(events[:i], p, e); msg != "" {
			out = append(out, Violation{Property: PropNode, At: e.At, Res: ResNode, Clients: []int{owner[p]},
				Msg: fmt.Sprintf("%s, %v after the heal: %s", p, back.Round(time.Millisecond), msg)})
		} else if back > cfg.ProgressBound {
			out = append(out, Violation{Property: PropNode, At: e.At, Res: ResNode, Clients: []int{owner[p]},
				Msg: fmt.Sprintf("%s was back only %v after the heal, beyond the bound of %v", p, back.Round(time.Millisecond), cfg.ProgressBound)})
		}
	}
	return out, counts
}
