package nemesis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// The properties a Violation can break.
const (
	PropExclusion = "exclusion"
	PropToken     = "token"
	PropRegister  = "register"
	PropProgress  = "progress"
	PropLeftover  = "leftover"
	PropOrphan    = "orphan" // a failed call left a node while its session lived
	PropError     = "error"
	PropHarness   = "harness" // the workload itself broke its rules (a write outside its holding)
)

// Violation is one broken property.
type Violation struct {
	Property string
	At       time.Duration // where on the time line to look
	Res      string        // the resource, "" if none
	Clients  []int
	Holdings []int32
	Msg      string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s violation at %.3fs: %s", v.Property, v.At.Seconds(), v.Msg)
}

// Config tells Check what the history cannot.
type Config struct {
	// Permits is the number of permits of each Permit resource (1 if
	// absent).
	Permits map[string]int
	// ProgressBound is how soon after the heal every workload must
	// acquire again.
	ProgressBound time.Duration
	// ExpirySlack is taken off the earliest time the server can have
	// expired a session without strict mode (its newest answered send plus
	// its timeout): a follower answers a ping before it tells the leader,
	// and a follower cut off from its leader answers for up to syncLimit x
	// tickTime. It never excuses a strict session.
	ExpirySlack time.Duration
}

// Report is what Check found.
type Report struct {
	Violations []Violation
	Counts     Counts
}

// Counts are the run's figures, for the summary line.
type Counts struct {
	Faults        map[string]int // by fault kind
	Grants        map[string]int // by resource and mode ("mutex", "rw-shared", ...)
	Requeues      int            // grants by Requeue
	EmptyGrants   int            // grants whose Lost was already closed
	Busy          int            // try operations that found the resource taken
	Lost          int            // holdings whose holder noticed Lost close
	Sessions      int            // sessions started
	Expired       int            // sessions that ended expired (forced ones included)
	Forced        int            // forced expiries the nemesis sent
	ExcusedForced int            // conflicting overlaps excused by a forced expiry
	ExcusedExpiry int            // conflicting overlaps excused by a server expiry (no strict mode)
	Writes        int            // fenced writes
	Rejected      int            // fenced writes the register refused (stale tokens)
	Errors        map[string]int // by kind ("UNKNOWN" for none)
	Leftovers     int            // nodes left after the sessions closed
	OrphanChecks  int            // looks for nodes left by a failed call while its session lived
	Orphans       int            // such looks that found some
	ProgressMax   time.Duration  // the slowest workload's first grant after the heal
	MultiLock     int            // holdings (one per path) granted by MultiLocks
	Cache         CacheCounts
	Node          NodeCounts
	Data          DataCounts // the counters' and the queues'
	Events        int
}

// holding is one grant and how it ended, rebuilt from the history.
type holding struct {
	id     int32
	client int
	gen    int32
	res    string
	work   string // the workload: res, or the MultiLock's name (Event.Work)
	mode   Mode
	token  int64
	op     string
	grant  time.Duration
	end    time.Duration // min(release start, Lost noticed); MaxInt64 if neither
	empty  bool
	grantI int // index of the grant event
	// told is when the runner saw the holding's Lost close, for a user's
	// workload (KindLostSeen); MaxInt64 if never.
	told time.Duration
}

type sessionKey struct {
	client int
	gen    int32
}

// session is what the history says about one session.
type session struct {
	strict    bool
	timeout   time.Duration
	ended     bool
	endKind   string
	endAt     time.Duration
	confirmed time.Duration
	forced    bool
	forcedAt  time.Duration
}

// Check judges a recorded history; see the package documentation for the
// properties. It is a pure function of events and cfg.
func Check(events []Event, cfg Config) Report {
	hs, sessions := rebuild(events)
	var r Report
	r.Counts = count(events, hs)
	ex := exclusion(hs, sessions, cfg)
	r.Violations = append(r.Violations, ex.violations...)
	r.Counts.ExcusedForced, r.Counts.ExcusedExpiry = ex.forced, ex.expired
	r.Violations = append(r.Violations, tokens(hs, sessions, cfg)...)
	r.Violations = append(r.Violations, register(events, hs)...)
	pv, pmax := progress(events, hs, cfg)
	r.Violations = append(r.Violations, pv...)
	r.Counts.ProgressMax = pmax
	r.Violations = append(r.Violations, leftovers(events)...)
	r.Violations = append(r.Violations, twiceCheck(events)...)
	r.Violations = append(r.Violations, errorKindsOf(events)...)
	cv, cc := cacheCheck(events, cfg)
	r.Violations = append(r.Violations, cv...)
	r.Counts.Cache = cc
	nv, nc := nodeCheck(events, cfg)
	r.Violations = append(r.Violations, nv...)
	r.Counts.Node = nc
	dv, counters := counterCheck(events)
	qv, queues := queueCheck(events)
	r.Violations = append(r.Violations, dv...)
	r.Violations = append(r.Violations, qv...)
	r.Counts.Data = counters
	r.Counts.Data.Offers, r.Counts.Data.OfferMaybe, r.Counts.Data.Taken, r.Counts.Data.TakeMaybe, r.Counts.Data.Left =
		queues.Offers, queues.OfferMaybe, queues.Taken, queues.TakeMaybe, queues.Left
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return r
}

// rebuild reconstructs the holdings and sessions of a history.
func rebuild(events []Event) (map[int32]*holding, map[sessionKey]*session) {
	hs := map[int32]*holding{}
	ss := map[sessionKey]*session{}
	sess := func(e Event) *session {
		k := sessionKey{e.Client, e.Gen}
		s := ss[k]
		if s == nil {
			s = &session{}
			ss[k] = s
		}
		return s
	}
	for i, e := range events {
		switch e.Kind {
		case KindSession:
			s := sess(e)
			s.strict, s.timeout = e.Strict, e.Timeout
		case KindSessionEnd:
			s := sess(e)
			s.ended, s.endKind, s.endAt, s.confirmed = true, e.ErrKind, e.At, e.Confirmed
		case KindForcedExpiry:
			s := sess(e)
			if !s.forced {
				s.forced, s.forcedAt = true, e.At
			}
		case KindGrant:
			h := &holding{id: e.Holding, client: e.Client, gen: e.Gen, res: e.Res, work: cmp.Or(e.Work, e.Res), mode: e.Mode,
				token: e.Token, op: e.Op, grant: e.At, end: math.MaxInt64, empty: e.Empty, grantI: i, told: math.MaxInt64}
			if e.Empty {
				h.end = e.At
			}
			hs[e.Holding] = h
		case KindLost, KindRelease:
			if h := hs[e.Holding]; h != nil && e.At < h.end {
				h.end = e.At
			}
		case KindLostSeen:
			if h := hs[e.Holding]; h != nil && e.At < h.told {
				h.told = e.At
			}
		}
	}
	return hs, ss
}

// excuse tells whether x's session was over for the server by time at,
// without x's holder knowing: it ended expired, and the nemesis had set
// out to expire it by then, or (no strict mode) at was at least its
// timeout, less the slack, after its newest answered send. A session the
// client closed counts as expired too when nothing was answered for its
// timeout before the close: its close never reached a server that could
// have expired it by then (a member that stalled while the client waited
// for it, say), so the server's end of it is unknown. No excuse holds for
// a holder that had been told (ignoredLost).
func excuse(x *holding, at time.Duration, ss map[sessionKey]*session, cfg Config) (string, bool) {
	s := ss[sessionKey{x.client, x.gen}]
	if s == nil || ignoredLost(x, at, s) {
		return "", false
	}
	expired := s.ended && s.endKind == ErrKindSessionExpired
	if s.forced && expired && at >= s.forcedAt {
		return "forced", true
	}
	unheard := s.ended && s.endKind == ErrKindSessionClosed && s.endAt >= s.confirmed+s.timeout
	if !s.strict && (expired || unheard) && at >= s.confirmed+s.timeout-cfg.ExpirySlack {
		return "expired", true
	}
	return "", false
}

// excused tells whether the overlap of a and b is explained by either
// session ending on the server before the other's grant.
func excused(a, b *holding, ss map[sessionKey]*session, cfg Config) (string, bool) {
	if k, ok := excuse(a, b.grant, ss, cfg); ok {
		return k, true
	}
	return excuse(b, a.grant, ss, cfg)
}

// conflict tells whether two holdings of one resource exclude each other.
func conflict(a, b *holding) bool {
	if a.mode == Permit || b.mode == Permit {
		return true // counted against the permits
	}
	return a.mode == Exclusive || b.mode == Exclusive
}

// byResource groups the non-empty holdings per resource in grant order.
func byResource(hs map[int32]*holding) map[string][]*holding {
	out := map[string][]*holding{}
	for _, h := range hs {
		if !h.empty {
			out[h.res] = append(out[h.res], h)
		}
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b *holding) int {
			if c := cmp.Compare(a.grant, b.grant); c != 0 {
				return c
			}
			return cmp.Compare(a.grantI, b.grantI)
		})
	}
	return out
}

type exclusionResult struct {
	violations      []Violation
	forced, expired int
}

// exclusion sweeps each resource's holdings in grant order: at each grant,
// the holdings still live that conflict with it must, beyond what the
// resource allows, be excused.
func exclusion(hs map[int32]*holding, ss map[sessionKey]*session, cfg Config) exclusionResult {
	var r exclusionResult
	groups := byResource(hs)
	for _, res := range sortedKeys(groups) {
		var active []*holding
		for _, b := range groups[res] {
			live := active[:0]
			for _, a := range active {
				if a.end > b.grant {
					live = append(live, a)
				}
			}
			active = live
			var hard []*holding
			var kinds []string
			n := 0
			for _, a := range active {
				if !conflict(a, b) {
					continue
				}
				n++
				if k, ok := excused(a, b, ss, cfg); ok {
					kinds = append(kinds, k)
				} else {
					hard = append(hard, a)
				}
			}
			allowed := 0 // conflicting holdings that may live beside b
			if b.mode == Permit {
				allowed = max(cfg.Permits[res], 1) - 1
			}
			switch {
			case len(hard) > allowed:
				r.violations = append(r.violations, overlapViolation(res, b, hard, allowed))
			case n > allowed:
				if slices.Contains(kinds, "forced") {
					r.forced++
				} else {
					r.expired++
				}
			}
			active = append(active, b)
		}
	}
	return r
}

func overlapViolation(res string, b *holding, hard []*holding, allowed int) Violation {
	v := Violation{Property: PropExclusion, At: b.grant, Res: res}
	var parts []string
	for _, a := range hard {
		v.Clients = append(v.Clients, a.client)
		v.Holdings = append(v.Holdings, a.id)
		parts = append(parts, fmt.Sprintf("h%d (c%d/%d, %s, granted %.3fs, %s)", a.id, a.client, a.gen, a.mode, a.grant.Seconds(), endString(a.end)))
	}
	v.Clients = append(v.Clients, b.client)
	v.Holdings = append(v.Holdings, b.id)
	what := "while"
	if allowed > 0 {
		what = fmt.Sprintf("beyond its %d permits, while", allowed+1)
	}
	v.Msg = fmt.Sprintf("%s: h%d (c%d/%d, %s) granted %s %s still held, neither session ended on the server by then",
		res, b.id, b.client, b.gen, b.mode, what, strings.Join(parts, ", "))
	return v
}

func endString(end time.Duration) string {
	if end == math.MaxInt64 {
		return "never released"
	}
	return fmt.Sprintf("held until %.3fs", end.Seconds())
}

// tokens checks that tokens strictly increase in grant order between
// holdings that exclude each other. Permit holdings carry no token.
func tokens(hs map[int32]*holding, ss map[sessionKey]*session, cfg Config) []Violation {
	var out []Violation
	groups := byResource(hs)
	for _, res := range sortedKeys(groups) {
		l := groups[res]
		maxAll, maxExcl := int64(math.MinInt64), int64(math.MinInt64)
		for j, b := range l {
			if b.mode == Permit {
				continue
			}
			bound := maxAll
			if b.mode == Shared {
				bound = maxExcl
			}
			if b.token <= bound {
				// Rare: find the earlier holdings it does not exceed.
				for _, a := range l[:j] {
					if a.mode == Permit || !conflict(a, b) || a.token < b.token {
						continue
					}
					if _, ok := excused(a, b, ss, cfg); ok {
						continue
					}
					out = append(out, Violation{
						Property: PropToken, At: b.grant, Res: res,
						Clients:  []int{a.client, b.client},
						Holdings: []int32{a.id, b.id},
						Msg: fmt.Sprintf("%s: h%d (c%d/%d, %s) granted at %.3fs with token %d, not above h%d's token %d (c%d/%d, %s, granted earlier at %.3fs)",
							res, b.id, b.client, b.gen, b.mode, b.grant.Seconds(), b.token, a.id, a.token, a.client, a.gen, a.mode, a.grant.Seconds()),
					})
					break
				}
			}
			maxAll = max(maxAll, b.token)
			if b.mode == Exclusive {
				maxExcl = max(maxExcl, b.token)
			}
		}
	}
	return out
}

// register checks each fenced register's decisions, in the order it made
// them, and that every write fell inside its holding.
func register(events []Event, hs map[int32]*holding) []Violation {
	var out []Violation
	highest := map[string]int64{}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Kind != KindWrite {
			continue
		}
		hi, ok := highest[e.Res], seen[e.Res]
		valid := !ok || e.Token >= hi
		switch {
		case e.Accepted && !valid:
			out = append(out, Violation{Property: PropRegister, At: e.At, Res: e.Res,
				Clients: []int{e.Client}, Holdings: []int32{e.Holding},
				Msg: fmt.Sprintf("register %s accepted token %d from h%d (c%d/%d) after accepting %d", e.Res, e.Token, e.Holding, e.Client, e.Gen, hi)})
		case !e.Accepted && valid:
			out = append(out, Violation{Property: PropRegister, At: e.At, Res: e.Res,
				Clients: []int{e.Client}, Holdings: []int32{e.Holding},
				Msg: fmt.Sprintf("register %s refused token %d from h%d (c%d/%d), not below the highest it accepted (%d)", e.Res, e.Token, e.Holding, e.Client, e.Gen, hi)})
		}
		if e.Accepted {
			if ok {
				hi = max(hi, e.Token)
			} else {
				hi = e.Token
			}
			highest[e.Res], seen[e.Res] = hi, true
		}
		h := hs[e.Holding]
		switch {
		case h == nil:
			out = append(out, Violation{Property: PropHarness, At: e.At, Res: e.Res, Clients: []int{e.Client},
				Msg: fmt.Sprintf("write to %s by unknown holding h%d", e.Res, e.Holding)})
		case h.res != e.Res || e.At < h.grant || e.At > h.end || h.empty:
			out = append(out, Violation{Property: PropHarness, At: e.At, Res: e.Res, Clients: []int{e.Client}, Holdings: []int32{e.Holding},
				Msg: fmt.Sprintf("h%d wrote to %s at %.3fs outside its holding of %s (granted %.3fs, %s)", e.Holding, e.Res, e.At.Seconds(), h.res, h.grant.Seconds(), endString(h.end))})
		}
	}
	return out
}

type workloadKey struct {
	client int
	res    string
}

// progress checks that every workload acquired again soon after the last
// heal, and returns the slowest one's delay.
func progress(events []Event, hs map[int32]*holding, cfg Config) ([]Violation, time.Duration) {
	healed, ok := time.Duration(0), false
	var workloads []workloadKey
	var queues []string
	doing := map[workloadKey]string{} // what a stalled workload's worker was doing
	for _, e := range events {
		switch e.Kind {
		case KindHealed:
			healed, ok = e.At, true
		case KindWorkload:
			workloads = append(workloads, workloadKey{e.Client, e.Res})
		case KindQueue:
			if e.Client >= 0 {
				doing[workloadKey{e.Client, e.Res}] = e.Detail
			} else {
				queues = append(queues, e.Detail)
			}
		}
	}
	// What the workload's paths held when the runner gave up waiting,
	// and what its worker was doing.
	held := func(w workloadKey) string {
		var out []string
		for _, q := range queues {
			if strings.Contains(q, "/"+w.res+" holds") || strings.Contains(q, "/"+w.res+"/") {
				out = append(out, q)
			}
		}
		if d := doing[w]; d != "" {
			out = append(out, d)
		}
		if len(out) == 0 {
			return ""
		}
		return "; at the end of the wait " + strings.Join(out, "; ")
	}
	if !ok {
		return []Violation{{Property: PropProgress, Msg: "the history has no heal: the run did not finish its faults"}}, 0
	}
	first := map[workloadKey]time.Duration{}
	for _, h := range hs {
		k := workloadKey{h.client, h.work}
		if h.empty || h.grant < healed {
			continue
		}
		if t, ok := first[k]; !ok || h.grant < t {
			first[k] = h.grant
		}
	}
	var out []Violation
	var slowest time.Duration
	for _, w := range workloads {
		t, ok := first[w]
		switch {
		case !ok:
			out = append(out, Violation{Property: PropProgress, At: healed, Res: w.res, Clients: []int{w.client},
				Msg: fmt.Sprintf("client %d never acquired %s after the heal at %.3fs%s", w.client, w.res, healed.Seconds(), held(w))})
		case t-healed > cfg.ProgressBound:
			out = append(out, Violation{Property: PropProgress, At: t, Res: w.res, Clients: []int{w.client},
				Msg: fmt.Sprintf("client %d first acquired %s %v after the heal, beyond the bound of %v", w.client, w.res, (t - healed).Round(time.Millisecond), cfg.ProgressBound)})
		}
		if ok {
			slowest = max(slowest, t-healed)
		}
	}
	return out, slowest
}

// leftovers reports every node left after the sessions closed, every node
// a failed call left while its session lived, and a history whose scan
// never ran.
func leftovers(events []Event) []Violation {
	var out []Violation
	scanned := false
	for i, e := range events {
		switch e.Kind {
		case KindScan:
			scanned = true
		case KindLeftover:
			out = append(out, Violation{Property: PropLeftover, At: e.At, Msg: "node left after every session closed: " + e.Detail})
		case KindOrphanCheck:
			if e.Detail == "" {
				continue
			}
			out = append(out, Violation{Property: PropOrphan, At: e.At, Res: e.Res, Clients: []int{e.Client},
				Msg: fmt.Sprintf("c%d/%d %s failed, yet left %s while its session lived%s", e.Client, e.Gen, e.Op, e.Detail, orphanTrail(events[:i], e))})
		}
	}
	if !scanned {
		out = append(out, Violation{Property: PropLeftover, Msg: "the leftover scan never ran"})
	}
	return out
}

// orphanTrail describes, for the orphan check c, the failure it checks
// (the client's last error of that call before it) and the client's own
// events on the resource in the 10 s before that failure, which may lie
// outside the timeline printed around the check.
func orphanTrail(before []Event, c Event) string {
	fail := -1
	for i := len(before) - 1; i >= 0; i-- {
		e := before[i]
		if e.Kind == KindError && e.Client == c.Client && e.Gen == c.Gen && e.Op == c.Op {
			fail = i
			break
		}
	}
	if fail < 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; the call failed at %.3fs; the client's trail:", before[fail].At.Seconds())
	for _, e := range before[:fail+1] {
		if e.Client != c.Client || e.At < before[fail].At-10*time.Second {
			continue
		}
		if e.Res == c.Res || strings.HasPrefix(e.Res, c.Res+"/") || e.Kind == KindSession || e.Kind == KindSessionEnd {
			b.WriteString("\n    " + e.String())
		}
	}
	return b.String()
}

// errorKindsOf reports every error of no documented kind, or of a kind its
// operation cannot return.
func errorKindsOf(events []Event) []Violation {
	var out []Violation
	for _, e := range events {
		if e.Kind != KindError || Allowed(e.Op, e.ErrKind) {
			continue
		}
		what := "an error of no documented kind"
		if e.ErrKind != "" {
			what = fmt.Sprintf("a %s error, which %s cannot return", e.ErrKind, e.Op)
		}
		out = append(out, Violation{Property: PropError, At: e.At, Res: e.Res, Clients: []int{e.Client},
			Msg: fmt.Sprintf("c%d/%d %s returned %s: %s", e.Client, e.Gen, e.Op, what, e.Detail)})
	}
	return out
}

func count(events []Event, hs map[int32]*holding) Counts {
	c := Counts{Faults: map[string]int{}, Grants: map[string]int{}, Errors: map[string]int{}, Events: len(events)}
	for _, e := range events {
		switch e.Kind {
		case KindFault:
			c.Faults[faultName(e.Detail)]++
		case KindSession:
			c.Sessions++
		case KindSessionEnd:
			if e.ErrKind == ErrKindSessionExpired {
				c.Expired++
			}
		case KindForcedExpiry:
			c.Forced++
		case KindBusy:
			c.Busy++
		case KindLost:
			c.Lost++
		case KindWrite:
			c.Writes++
			if !e.Accepted {
				c.Rejected++
			}
		case KindError:
			k := e.ErrKind
			if k == "" {
				k = "UNKNOWN"
			}
			c.Errors[k]++
		case KindLeftover:
			c.Leftovers++
		case KindOrphanCheck:
			c.OrphanChecks++
			if e.Detail != "" {
				c.Orphans++
			}
		}
	}
	shared := map[string]bool{}
	for _, h := range hs {
		shared[h.res] = shared[h.res] || h.mode == Shared
	}
	for _, h := range hs {
		l := label(h.res)
		if shared[h.res] {
			l += "-" + h.mode.String()
		}
		c.Grants[l]++
		if h.op == OpMutexRequeue {
			c.Requeues++
		}
		if h.work != h.res {
			c.MultiLock++
		}
		if h.empty {
			c.EmptyGrants++
		}
	}
	return c
}

// faultName is the first word of a fault event's detail: its kind.
func faultName(detail string) string {
	if i := strings.IndexByte(detail, ' '); i >= 0 {
		return detail[:i]
	}
	return detail
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Summary is the one-line account of a run: the seed and every count.
func Summary(seed uint64, faults int, wall time.Duration, r Report) string {
	c := r.Counts
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis seed=%d wall=%v faults=%d [%s]", seed, wall.Round(time.Second), faults, kv(c.Faults))
	total := 0
	for _, n := range c.Grants {
		total += n
	}
	fmt.Fprintf(&b, " grants=%d [%s] multilock-holdings=%d requeues=%d lost-at-grant=%d trylock-busy=%d lost=%d",
		total, kv(c.Grants), c.MultiLock, c.Requeues, c.EmptyGrants, c.Busy, c.Lost)
	fmt.Fprintf(&b, " sessions=%d expired=%d forced=%d excused-overlaps=[forced=%d expired=%d]",
		c.Sessions, c.Expired, c.Forced, c.ExcusedForced, c.ExcusedExpiry)
	nerr := 0
	for _, n := range c.Errors {
		nerr += n
	}
	fmt.Fprintf(&b, " writes=%d rejected=%d errors=%d [%s] progress-max=%v",
		c.Writes, c.Rejected, nerr, kv(c.Errors), c.ProgressMax.Round(time.Millisecond))
	fmt.Fprintf(&b, " cache=[caches=%d events=%d tree-writes=%d unconfirmed=%d converged=%v]",
		c.Cache.Caches, c.Cache.Events, c.Cache.Writes, c.Cache.Unconfirmed, c.Cache.Converged.Round(time.Millisecond))
	fmt.Fprintf(&b, " pnode=[sets=%d unconfirmed=%d deleted=%d renewals=%d back=%v]",
		c.Node.Sets, c.Node.Unconfirmed, c.Node.Deletes, c.Node.Renewals, c.Node.Back.Round(time.Millisecond))
	d := c.Data
	fmt.Fprintf(&b, " counters=[increments=%d unconfirmed=%d failed=%d] queues=[offers=%d unconfirmed=%d taken=%d maybe=%d left=%d]",
		d.Increments, d.Unconfirmed, d.Failed, d.Offers, d.OfferMaybe, d.Taken, d.TakeMaybe, d.Left)
	fmt.Fprintf(&b, " orphan-checks=%d orphans=%d leftovers=%d events=%d violations=%d",
		c.OrphanChecks, c.Orphans, c.Leftovers, c.Events, len(r.Violations))
	return b.String()
}

func kv(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
