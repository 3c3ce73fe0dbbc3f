package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The checker must be able to fail: each test builds a history by hand
// that breaks (or, as a control, keeps) one property.

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// hist builds a history. Times are seconds; events are sorted by time
// when the history is taken.
type hist struct {
	ev   []Event
	next int32
}

func (b *hist) add(t float64, e Event) {
	e.At = sec(t)
	b.ev = append(b.ev, e)
}

func (b *hist) session(t float64, client int, gen int32, strict bool, timeout float64) {
	b.add(t, Event{Kind: KindSession, Client: client, Gen: gen, Strict: strict, Timeout: sec(timeout)})
}

func (b *hist) sessionEnd(t float64, client int, gen int32, kind string, confirmed float64) {
	b.add(t, Event{Kind: KindSessionEnd, Client: client, Gen: gen, ErrKind: kind, Confirmed: sec(confirmed)})
}

func (b *hist) forced(t float64, client int, gen int32) {
	b.add(t, Event{Kind: KindForcedExpiry, Client: client, Gen: gen})
}

// hold records a grant at t1 and a release at t2 (none if t2 < 0).
func (b *hist) hold(client int, gen int32, res string, mode Mode, token int64, t1, t2 float64) int32 {
	b.next++
	id := b.next
	b.add(t1, Event{Kind: KindGrant, Client: client, Gen: gen, Res: res, Mode: mode, Holding: id, Token: token, Op: "test"})
	if t2 >= 0 {
		b.add(t2, Event{Kind: KindRelease, Client: client, Gen: gen, Res: res, Holding: id})
	}
	return id
}

func (b *hist) lost(t float64, id int32) {
	b.add(t, Event{Kind: KindLost, Holding: id})
}

func (b *hist) write(t float64, client int, res string, id int32, token int64, accepted bool) {
	b.add(t, Event{Kind: KindWrite, Client: client, Res: res, Holding: id, Token: token, Accepted: accepted})
}

// finish adds what a complete run ends with: a heal at 100 s, a grant
// after it for each workload (a client and resource with a grant before
// the heal, in the mode of its first), and a clean leftover scan.
func (b *hist) finish() []Event {
	seen := map[workloadKey]Event{} // a workload's first grant
	var ws []workloadKey
	for _, e := range b.ev {
		k := workloadKey{e.Client, cmp.Or(e.Work, e.Res)}
		if _, ok := seen[k]; e.Kind == KindGrant && e.At < sec(100) && !ok {
			seen[k] = e
			ws = append(ws, k)
		}
	}
	b.add(100, Event{Kind: KindHealed, Client: -1})
	for i, w := range ws {
		first := seen[w]
		b.add(0, Event{Kind: KindWorkload, Client: w.client, Res: w.res})
		t := 101 + float64(i)*0.01
		token := int64(1<<40 + i)
		if first.Mode == Permit {
			token = 0
		}
		b.hold(w.client, 99, first.Res, first.Mode, token, t, t+0.001)
		b.ev[len(b.ev)-2].Work = first.Work // the grant
	}
	b.add(110, Event{Kind: KindScan, Client: -1})
	return b.events()
}

func (b *hist) events() []Event {
	ev := append([]Event(nil), b.ev...)
	slices.SortStableFunc(ev, func(x, y Event) int { return cmp.Compare(x.At, y.At) })
	return ev
}

var testConfig = Config{Permits: map[string]int{"sem": 2}, ProgressBound: 5 * time.Second, ExpirySlack: sec(0.1)}

// props returns the properties of r's violations.
func props(r Report) []string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Property)
	}
	return out
}

func wantProps(t *testing.T, r Report, want ...string) {
	t.Helper()
	got := props(r)
	if !slices.Equal(got, want) {
		var b strings.Builder
		for _, v := range r.Violations {
			b.WriteString("\n  " + v.String())
		}
		t.Fatalf("violations %v, want %v:%s", got, want, b.String())
	}
}

func TestCheckCleanHistory(t *testing.T) {
	var b hist
	for c := range 3 {
		b.session(0, c, 1, true, 3)
	}
	// Mutex handoffs, each token above the last, each holder writing.
	a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
	b.write(1.5, 0, "mutex", a, 10, true)
	m := b.hold(1, 1, "mutex", Exclusive, 12, 2, 3)
	b.write(2.5, 1, "mutex", m, 12, true)
	// Readers together, sharing a token, then a writer, then a reader.
	b.hold(0, 1, "rw", Shared, 20, 1, 3)
	b.hold(1, 1, "rw", Shared, 20, 1.5, 2.5)
	w := b.hold(2, 1, "rw", Exclusive, 25, 3, 4)
	b.write(3.5, 2, "rw", w, 25, true)
	b.hold(0, 1, "rw", Shared, 27, 4, 5)
	// Two permits used at once.
	b.hold(0, 1, "sem", Permit, 0, 1, 3)
	b.hold(1, 1, "sem", Permit, 0, 2, 4)
	b.hold(2, 1, "sem", Permit, 0, 3, 5)
	r := Check(b.finish(), testConfig)
	wantProps(t, r)
	if r.Counts.Grants["mutex"] != 4 || r.Counts.Grants["rw-shared"] != 5 || r.Counts.Grants["rw-exclusive"] != 2 || r.Counts.Writes != 3 {
		t.Errorf("counts %+v", r.Counts)
	}
}

func TestCheckOverlap(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 3)
	c := b.hold(1, 1, "mutex", Exclusive, 12, 2, 4)
	ev := b.finish()
	r := Check(ev, testConfig)
	wantProps(t, r, PropExclusion)
	v := r.Violations[0]
	if v.At != sec(2) || !slices.Contains(v.Holdings, a) || !slices.Contains(v.Holdings, c) {
		t.Errorf("violation %+v", v)
	}
	tl := Timeline(ev, v, 3*time.Second, 50)
	if !strings.Contains(tl, fmt.Sprintf(">>      1.000s grant         c0/1 mutex h%d", a)) ||
		!strings.Contains(tl, fmt.Sprintf(">>      2.000s grant         c1/1 mutex h%d", c)) {
		t.Errorf("timeline does not mark both holdings:\n%s", tl)
	}
}

func TestCheckNeverReleased(t *testing.T) {
	var b hist
	b.hold(0, 1, "mutex", Exclusive, 10, 1, -1)
	b.hold(1, 1, "mutex", Exclusive, 12, 50, 51)
	// It overlaps every later holding: the one at 50 s and both after
	// the heal.
	wantProps(t, Check(b.finish(), testConfig), PropExclusion, PropExclusion, PropExclusion)
}

func TestCheckLost(t *testing.T) {
	t.Run("before the other's grant", func(t *testing.T) {
		var b hist
		b.session(0, 0, 1, true, 3)
		a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 3)
		b.lost(1.5, a)
		b.hold(1, 1, "mutex", Exclusive, 12, 2, 4)
		r := Check(b.finish(), testConfig)
		wantProps(t, r)
		if r.Counts.Lost != 1 {
			t.Errorf("lost %d, want 1", r.Counts.Lost)
		}
	})
	t.Run("after the other's grant", func(t *testing.T) {
		var b hist
		b.session(0, 0, 1, true, 3)
		a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 3)
		b.lost(2.5, a)
		b.hold(1, 1, "mutex", Exclusive, 12, 2, 4)
		wantProps(t, Check(b.finish(), testConfig), PropExclusion)
	})
	t.Run("at grant", func(t *testing.T) {
		var b hist
		b.next++
		b.add(1, Event{Kind: KindGrant, Client: 0, Gen: 1, Res: "mutex", Mode: Exclusive, Holding: b.next, Token: 10, Empty: true})
		b.add(3, Event{Kind: KindRelease, Client: 0, Gen: 1, Res: "mutex", Holding: b.next})
		b.hold(1, 1, "mutex", Exclusive, 5, 1, 2) // neither overlap nor token order counts an empty holding
		r := Check(b.finish(), testConfig)
		wantProps(t, r)
		if r.Counts.EmptyGrants != 1 {
			t.Errorf("empty grants %d, want 1", r.Counts.EmptyGrants)
		}
	})
}

func TestCheckForcedExpiry(t *testing.T) {
	build := func(forcedAt float64, end string) []Event {
		var b hist
		b.session(0, 0, 1, true, 3)
		b.session(0, 1, 1, true, 3)
		b.hold(0, 1, "mutex", Exclusive, 10, 1, 3)
		b.forced(forcedAt, 0, 1)
		if end != "" {
			b.sessionEnd(2.9, 0, 1, end, 1.7)
		}
		b.hold(1, 1, "mutex", Exclusive, 12, 2, 4)
		return b.finish()
	}
	r := Check(build(1.8, ErrKindSessionExpired), testConfig)
	wantProps(t, r)
	if r.Counts.ExcusedForced != 1 || r.Counts.Forced != 1 {
		t.Errorf("counts %+v", r.Counts)
	}
	// Expired on purpose only after the other's grant: no excuse.
	wantProps(t, Check(build(2.2, ErrKindSessionExpired), testConfig), PropExclusion)
	// The nemesis tried, but the session did not end expired.
	wantProps(t, Check(build(1.8, ""), testConfig), PropExclusion)
	wantProps(t, Check(build(1.8, ErrKindSessionClosed), testConfig), PropExclusion)
}

func TestCheckServerExpiry(t *testing.T) {
	// Holder 0's session ends expired; its newest answered send was at
	// 0.5 s, timeout 1 s, slack 0.1 s: the server cannot have expired it
	// before 1.4 s.
	buildHeard := func(strict bool, end string, other, confirmed float64) []Event {
		var b hist
		b.session(0, 0, 1, strict, 1)
		b.session(0, 1, 1, true, 1)
		a := b.hold(0, 1, "mutex", Exclusive, 10, 0.2, 5)
		b.sessionEnd(4.9, 0, 1, end, confirmed)
		b.lost(4.9, a)
		b.hold(1, 1, "mutex", Exclusive, 12, other, other+1)
		return b.finish()
	}
	build := func(strict bool, end string, other float64) []Event { return buildHeard(strict, end, other, 0.5) }
	r := Check(build(false, ErrKindSessionExpired, 2), testConfig)
	wantProps(t, r)
	if r.Counts.ExcusedExpiry != 1 || r.Counts.Expired != 1 {
		t.Errorf("counts %+v", r.Counts)
	}
	t.Run("granted before the server could expire it", func(t *testing.T) {
		wantProps(t, Check(build(false, ErrKindSessionExpired, 1.2), testConfig), PropExclusion)
	})
	t.Run("session closed, heard until its close", func(t *testing.T) {
		// Answered at 4.85 s: the server cannot have expired it before
		// 5.75 s, long after the other's grant.
		wantProps(t, Check(buildHeard(false, ErrKindSessionClosed, 2, 4.85), testConfig), PropExclusion)
	})
	t.Run("session closed, unheard for its timeout before the close", func(t *testing.T) {
		// Nothing answered since 0.5 s: the close at 4.9 s never reached
		// a server that may have expired it from 1.4 s on.
		wantProps(t, Check(build(false, ErrKindSessionClosed, 2), testConfig))
		wantProps(t, Check(build(false, ErrKindSessionClosed, 1.2), testConfig), PropExclusion)
	})
	t.Run("strict session", func(t *testing.T) {
		// Strict mode must have closed Lost before the server expired it.
		wantProps(t, Check(build(true, ErrKindSessionExpired, 2), testConfig), PropExclusion)
	})
}

func TestCheckReadWrite(t *testing.T) {
	t.Run("reader while writer", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "rw", Exclusive, 10, 1, 3)
		b.hold(1, 1, "rw", Shared, 12, 2, 4)
		wantProps(t, Check(b.finish(), testConfig), PropExclusion)
	})
	t.Run("writer while reader", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "rw", Shared, 10, 1, 3)
		b.hold(1, 1, "rw", Shared, 10, 1.5, 2)
		b.hold(2, 1, "rw", Exclusive, 12, 2.5, 4)
		wantProps(t, Check(b.finish(), testConfig), PropExclusion)
	})
}

func TestCheckPermits(t *testing.T) {
	var b hist
	b.hold(0, 1, "sem", Permit, 0, 1, 4)
	b.hold(1, 1, "sem", Permit, 0, 2, 4)
	b.hold(2, 1, "sem", Permit, 0, 3, 4) // a third while two hold
	r := Check(b.finish(), testConfig)
	wantProps(t, r, PropExclusion)
	if !strings.Contains(r.Violations[0].Msg, "beyond its 2 permits") {
		t.Errorf("message %q", r.Violations[0].Msg)
	}
	// One permit by default.
	var c hist
	c.hold(0, 1, "other", Permit, 0, 1, 4)
	c.hold(1, 1, "other", Permit, 0, 2, 4)
	wantProps(t, Check(c.finish(), testConfig), PropExclusion)
}

func TestCheckTokens(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *hist)
		want  []string
	}{
		{"equal", func(b *hist) {
			b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
			b.hold(1, 1, "mutex", Exclusive, 10, 3, 4)
		}, []string{PropToken}},
		{"lower", func(b *hist) {
			b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
			b.hold(1, 1, "mutex", Exclusive, 9, 3, 4)
		}, []string{PropToken}},
		{"lower than an older one", func(b *hist) {
			b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
			b.hold(1, 1, "mutex", Exclusive, 20, 3, 4)
			b.hold(2, 1, "mutex", Exclusive, 15, 5, 6)
		}, []string{PropToken}},
		{"readers share", func(b *hist) {
			b.hold(0, 1, "rw", Shared, 10, 1, 2)
			b.hold(1, 1, "rw", Shared, 10, 1, 2)
			b.hold(2, 1, "rw", Shared, 8, 1.5, 2) // readers are not ordered among themselves
		}, nil},
		{"reader not above a writer", func(b *hist) {
			b.hold(0, 1, "rw", Exclusive, 10, 1, 2)
			b.hold(1, 1, "rw", Shared, 10, 3, 4)
		}, []string{PropToken}},
		{"writer not above a reader", func(b *hist) {
			b.hold(0, 1, "rw", Shared, 10, 1, 2)
			b.hold(1, 1, "rw", Exclusive, 9, 3, 4)
		}, []string{PropToken}},
		{"permits carry none", func(b *hist) {
			b.hold(0, 1, "sem", Permit, 0, 1, 2)
			b.hold(1, 1, "sem", Permit, 0, 3, 4)
		}, nil},
		{"inversion excused by a forced expiry", func(b *hist) {
			// Holder 1 was granted at the server first (token 9) but its
			// call returned late, after its session was expired on
			// purpose and holder 0 had been granted (token 10).
			b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
			b.forced(0.5, 1, 1)
			x := b.hold(1, 1, "mutex", Exclusive, 9, 3, 4)
			b.sessionEnd(3.01, 1, 1, ErrKindSessionExpired, 0.4)
			b.lost(3.01, x)
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b hist
			c.build(&b)
			wantProps(t, Check(b.finish(), testConfig), c.want...)
		})
	}
}

func TestCheckRegister(t *testing.T) {
	t.Run("accepted a lower token", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
		c := b.hold(1, 1, "mutex", Exclusive, 12, 2, 3)
		b.write(2.5, 1, "mutex", c, 12, true)
		d := b.hold(2, 1, "mutex", Exclusive, 14, 3, 4)
		b.write(3.5, 2, "mutex", d, 10, true) // a broken register takes 10 after 12
		wantProps(t, Check(b.finish(), testConfig), PropRegister)
	})
	t.Run("refused a valid token", func(t *testing.T) {
		var b hist
		a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
		b.write(1.5, 0, "mutex", a, 10, false)
		wantProps(t, Check(b.finish(), testConfig), PropRegister)
	})
	t.Run("stale write refused", func(t *testing.T) {
		var b hist
		b.session(0, 0, 1, true, 3)
		a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 3)
		b.forced(1.1, 0, 1)
		b.sessionEnd(2.9, 0, 1, ErrKindSessionExpired, 1)
		c := b.hold(1, 1, "mutex", Exclusive, 12, 2, 2.8)
		b.write(2.1, 1, "mutex", c, 12, true)
		b.write(2.2, 0, "mutex", a, 10, false)
		r := Check(b.finish(), testConfig)
		wantProps(t, r)
		if r.Counts.Rejected != 1 || r.Counts.ExcusedForced != 1 {
			t.Errorf("counts %+v", r.Counts)
		}
	})
	t.Run("write outside the holding", func(t *testing.T) {
		var b hist
		a := b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
		b.lost(1.5, a)
		b.write(1.7, 0, "mutex", a, 10, true) // after Lost was seen
		wantProps(t, Check(b.finish(), testConfig), PropHarness)
	})
}

func TestCheckProgress(t *testing.T) {
	t.Run("no grant after the heal", func(t *testing.T) {
		var b hist
		b.add(0, Event{Kind: KindWorkload, Client: 7, Res: "mutex"})
		b.add(0, Event{Kind: KindWorkload, Client: 6, Res: "mutex"})
		b.hold(6, 1, "mutex", Exclusive, 10, 102, 103)
		b.add(130, Event{Kind: KindQueue, Client: -1, Detail: "/n/mutex holds _c_a-lock-0000000001 (c3/2, created at zxid 0x5)"})
		b.add(130, Event{Kind: KindQueue, Client: 7, Res: "mutex", Detail: "its worker at the end of the wait: releasing on session 2, since 120.000s"})
		b.add(130, Event{Kind: KindQueue, Client: 6, Res: "mutex", Detail: "its worker at the end of the wait: holding"})
		r := Check(b.finish(), testConfig)
		wantProps(t, r, PropProgress)
		// The message names what the path held and what client 7's
		// worker was doing, not client 6's.
		msg := r.Violations[0].Msg
		if !strings.Contains(msg, "client 7 never acquired mutex") || !strings.Contains(msg, "(c3/2,") ||
			!strings.Contains(msg, "releasing on session 2") || strings.Contains(msg, "holding") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("too late", func(t *testing.T) {
		var b hist
		b.add(0, Event{Kind: KindWorkload, Client: 7, Res: "mutex"})
		b.hold(7, 1, "mutex", Exclusive, 10, 106, 107) // the bound is 5 s
		wantProps(t, Check(b.finish(), testConfig), PropProgress)
	})
	t.Run("an empty grant is no progress", func(t *testing.T) {
		var b hist
		b.add(0, Event{Kind: KindWorkload, Client: 7, Res: "mutex"})
		b.next++
		b.add(101, Event{Kind: KindGrant, Client: 7, Gen: 1, Res: "mutex", Mode: Exclusive, Holding: b.next, Token: 10, Empty: true})
		wantProps(t, Check(b.finish(), testConfig), PropProgress)
	})
	t.Run("no heal", func(t *testing.T) {
		r := Check([]Event{{Kind: KindScan}}, testConfig)
		wantProps(t, r, PropProgress)
	})
}

func TestCheckLeftovers(t *testing.T) {
	var b hist
	b.add(111, Event{Kind: KindLeftover, Client: -1, Detail: "/nemesis/mutex/_c_x-lock-0000000001"})
	r := Check(b.finish(), testConfig)
	wantProps(t, r, PropLeftover)
	if r.Counts.Leftovers != 1 {
		t.Errorf("leftovers %d", r.Counts.Leftovers)
	}
	var o hist
	o.add(5, Event{Kind: KindOrphanCheck, Client: 0, Gen: 1, Res: "mutex", Op: OpMutexLock})
	o.add(5.5, Event{Kind: KindError, Client: 0, Gen: 1, Res: "mutex", Op: OpMutexLock, ErrKind: "deadline", Detail: "context deadline exceeded"})
	o.add(6, Event{Kind: KindOrphanCheck, Client: 0, Gen: 1, Res: "mutex", Op: OpMutexLock, Detail: "/nemesis/mutex/_c_y-lock-0000000002"})
	r = Check(o.finish(), testConfig)
	wantProps(t, r, PropOrphan)
	if r.Counts.OrphanChecks != 2 || r.Counts.Orphans != 1 || !strings.Contains(r.Violations[0].Msg, "while its session lived") {
		t.Errorf("counts %+v, violation %v", r.Counts, r.Violations[0])
	}
	// The failure checked, which may lie outside the printed timeline, is named.
	if msg := r.Violations[0].Msg; !strings.Contains(msg, "the call failed at 5.500s") || !strings.Contains(msg, "context deadline exceeded") {
		t.Errorf("violation does not name the failure: %s", msg)
	}
	var c hist
	c.add(100, Event{Kind: KindHealed})
	wantProps(t, Check(c.events(), testConfig), PropLeftover) // the scan never ran
}

func TestCheckErrors(t *testing.T) {
	cases := []struct {
		op, kind string
		ok       bool
	}{
		{OpMutexLock, ErrKindSessionExpired, true},
		{OpMutexLock, ErrKindConnectionLoss, true},
		{OpMutexUnlock, ErrKindReleaseUnconfirmed, true},
		{OpMutexTryLock, ErrKindLocked, true},
		{OpRWTryRLock, ErrKindLocked, true},
		{OpMutexLock, ErrKindLocked, false},
		{OpSessionClose, ErrKindCloseUnconfirmed, true},
		{OpMutexUnlock, ErrKindCloseUnconfirmed, false},
		{OpSessionNew, ErrKindNoServer, true},
		{OpCampaign, ErrKindNoServer, false},
		{OpAcquire, "", false},
		{OpTryAcquire, ErrKindLocked, true},
		{OpAcquire, ErrKindLocked, false},
		{OpMultiTryLock, ErrKindLocked, true},
		{OpMultiLock, ErrKindLocked, false},
		{OpCacheNext, ErrKindSessionExpired, true},
		{OpCacheNext, ErrKindConnectionLoss, false},
		{OpNodeRun, ErrKindSessionClosed, false},
		{OpNodeSetData, ErrKindConnectionLoss, true},
	}
	for _, c := range cases {
		var b hist
		b.add(1, Event{Kind: KindError, Client: 0, Gen: 1, Op: c.op, ErrKind: c.kind, Detail: "boom"})
		var want []string
		if !c.ok {
			want = []string{PropError}
		}
		t.Run(c.op+"/"+c.kind, func(t *testing.T) { wantProps(t, Check(b.finish(), testConfig), want...) })
	}
}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("zkrecipes: lock /x: %w", err) }
	cases := []struct {
		err  error
		want string
	}{
		{wrap(zkrecipes.ErrSessionExpired), ErrKindSessionExpired},
		{wrap(zkrecipes.ErrSessionClosed), ErrKindSessionClosed},
		{wrap(zkrecipes.ErrConnectionLoss), ErrKindConnectionLoss},
		{wrap(fmt.Errorf("%w: /x/n", zkrecipes.ErrReleaseUnconfirmed)), ErrKindReleaseUnconfirmed},
		{wrap(zkrecipes.ErrNodeLost), ErrKindNodeLost},
		{wrap(zkrecipes.ErrLocked), ErrKindLocked},
		{wrap(context.DeadlineExceeded), ErrKindDeadline},
		{wrap(context.Canceled), ErrKindCanceled},
		{wrap(zkclient.ErrCloseUnconfirmed), ErrKindCloseUnconfirmed},
		{errors.Join(wrap(context.Canceled), wrap(zkrecipes.ErrSessionExpired)), ErrKindSessionExpired},
		{wrap(zkrecipes.ErrBusy), ""},
		{wrap(zkrecipes.ErrNotHeld), ""},
		{wrap(&zkclient.OpError{Op: "create", Path: "/x", Err: zkclient.ErrSessionMoved}), ""},
		{errors.New("something else"), ""},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestRegisterRecords: the register's own decisions, as recorded, pass the
// check, and a stale token is refused.
func TestRegisterRecords(t *testing.T) {
	h := NewHistory()
	reg := NewRegister(h, "mutex")
	h.Record(Event{Kind: KindGrant, Client: 0, Gen: 1, Res: "mutex", Mode: Exclusive, Holding: 1, Token: 10})
	h.Record(Event{Kind: KindGrant, Client: 1, Gen: 1, Res: "mutex", Mode: Exclusive, Holding: 2, Token: 12})
	for _, w := range []struct {
		holding int32
		token   int64
		want    bool
	}{{1, 10, true}, {1, 10, true}, {2, 12, true}, {1, 10, false}, {2, 12, true}} {
		if got := reg.Write(int(w.holding-1), 1, w.holding, w.token); got != w.want {
			t.Errorf("write of token %d: accepted %v, want %v", w.token, got, w.want)
		}
	}
	r := Check(h.Events(), testConfig)
	for _, v := range r.Violations {
		if v.Property == PropRegister || v.Property == PropHarness {
			t.Errorf("%v", v)
		}
	}
	if r.Counts.Writes != 5 || r.Counts.Rejected != 1 {
		t.Errorf("counts %+v", r.Counts)
	}
}

func TestSummary(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.hold(0, 1, "mutex", Exclusive, 10, 1, 2)
	b.add(0.5, Event{Kind: KindFault, Client: -1, Detail: "kill member 0 (leader) with SIGKILL for 1s"})
	b.add(3, Event{Kind: KindError, Client: 0, Gen: 1, Op: OpMutexLock, Detail: "?"})
	r := Check(b.finish(), testConfig)
	s := Summary(42, 1, time.Minute, r)
	for _, want := range []string{"seed=42", "faults=1 [kill=1]", "mutex=2", "errors=1 [UNKNOWN=1]", "violations=1"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q: %s", want, s)
		}
	}
}

// TestTimeline: the window keeps the lines nearest the violation and
// counts the rest; faults are always shown.
func TestTimeline(t *testing.T) {
	var b hist
	b.add(4.9, Event{Kind: KindFault, Client: -1, Detail: "pause member 1 with SIGSTOP for 2s"})
	for i := range 300 {
		b.hold(i%3, 1, "mutex", Exclusive, int64(i+1), 4+float64(i)*0.01, 4.005+float64(i)*0.01)
	}
	b.hold(5, 1, "other", Exclusive, 1, 5.5, 5.6) // another resource: not shown
	ev := b.events()
	v := Violation{Property: PropExclusion, At: sec(5.5), Res: "mutex", Holdings: []int32{151}}
	tl := Timeline(ev, v, 3*time.Second, 20)
	lines := strings.Split(strings.TrimSpace(tl), "\n")
	if len(lines) != 22 { // header, 20 events, the count
		t.Fatalf("%d lines:\n%s", len(lines), tl)
	}
	if !strings.Contains(tl, "more events in the window not shown") || strings.Contains(tl, "other") {
		t.Errorf("timeline:\n%s", tl)
	}
	if !strings.Contains(tl, ">>      5.500s grant") {
		t.Errorf("the violation's holding is not marked:\n%s", tl)
	}
	if all := Timeline(ev, v, 3*time.Second, 0); !strings.Contains(all, "fault") {
		t.Errorf("the fault is not shown:\n%s", all)
	}
}

// multi records the grants of one MultiLock call at t1, one holding per
// path with its token, and their release at t2; it returns the holdings.
func (b *hist) multi(client int, gen int32, paths []string, tokens []int64, t1, t2 float64) []int32 {
	work := "multilock(" + strings.Join(paths, "+") + ")"
	var ids []int32
	for i, p := range paths {
		id := b.hold(client, gen, p, Exclusive, tokens[i], t1, t2)
		for j := range b.ev {
			if b.ev[j].Kind == KindGrant && b.ev[j].Holding == id {
				b.ev[j].Work, b.ev[j].Op = work, OpMultiLock
			}
		}
		ids = append(ids, id)
	}
	return ids
}

func TestCheckMultiLock(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "mutex-a", Exclusive, 10, 1, 2)
		b.multi(1, 1, []string{"mutex", "mutex-a"}, []int64{20, 12}, 2, 3)
		b.multi(2, 1, []string{"mutex-a", "mutex-b"}, []int64{14, 30}, 3, 4)
		b.hold(0, 1, "mutex", Exclusive, 22, 3, 4) // beside the second MultiLock: other paths
		r := Check(b.finish(), testConfig)
		wantProps(t, r)
		// Each MultiLock workload acquired after the heal (finish grants
		// it again under its own name): progress is per workload, not per
		// path, or client 1's Mutex would stand for its MultiLock.
		if r.Counts.MultiLock != 4+2 {
			t.Errorf("multilock holdings %d, want 6", r.Counts.MultiLock)
		}
	})
	t.Run("overlap with a plain mutex on one path", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "mutex-a", Exclusive, 10, 1, 2.5)
		ids := b.multi(1, 1, []string{"mutex", "mutex-a"}, []int64{20, 12}, 2, 3)
		r := Check(b.finish(), testConfig)
		wantProps(t, r, PropExclusion)
		if v := r.Violations[0]; v.Res != "mutex-a" || !slices.Contains(v.Holdings, ids[1]) {
			t.Errorf("violation %+v, want one on mutex-a with h%d", v, ids[1])
		}
	})
	t.Run("two multilocks sharing a path", func(t *testing.T) {
		var b hist
		b.multi(1, 1, []string{"mutex", "mutex-a"}, []int64{20, 12}, 2, 3)
		b.multi(2, 1, []string{"mutex-a", "mutex-b"}, []int64{14, 30}, 2.5, 4)
		wantProps(t, Check(b.finish(), testConfig), PropExclusion)
	})
	t.Run("token of one path not above", func(t *testing.T) {
		var b hist
		b.hold(0, 1, "mutex-a", Exclusive, 15, 1, 2)
		b.multi(1, 1, []string{"mutex", "mutex-a"}, []int64{20, 12}, 2, 3) // 12 after 15 on mutex-a
		wantProps(t, Check(b.finish(), testConfig), PropToken)
	})
	t.Run("lost closes every path", func(t *testing.T) {
		var b hist
		b.session(0, 1, 1, true, 3)
		ids := b.multi(1, 1, []string{"mutex", "mutex-a"}, []int64{20, 12}, 2, 5)
		b.lost(2.5, ids[0])
		b.lost(2.5, ids[1])
		b.hold(0, 1, "mutex-a", Exclusive, 14, 3, 4)
		wantProps(t, Check(b.finish(), testConfig))
	})
	t.Run("no progress of the multilock", func(t *testing.T) {
		var b hist
		b.hold(1, 1, "mutex", Exclusive, 10, 1, 2) // client 1's plain Mutex acquires after the heal...
		b.add(0, Event{Kind: KindWorkload, Client: 1, Res: "multilock(mutex+mutex-a)"})
		r := Check(b.finish(), testConfig) // ...its MultiLock never does
		wantProps(t, r, PropProgress)
		if !strings.Contains(r.Violations[0].Msg, "never acquired multilock(mutex+mutex-a)") {
			t.Errorf("message %q", r.Violations[0].Msg)
		}
	})
}

// cacheHist is a clean history of a cache run: the writer's writes, one
// Cache (id 900) whose stream follows them, a heal at 100 s, the writer's
// stop at 100.5 s and the final snapshot at 101 s.
type cacheHist struct {
	hist
	id           int32      // the cache the events are of
	gen          int32      // its session's generation
	copy, server []treeNode // the final snapshot
}

func newCacheHist() *cacheHist {
	b := cacheHist{id: 900, gen: 1}
	w := func(t float64, op, p, data, outcome string, cz, mz int64, v int32) {
		b.add(t, Event{Kind: KindTreeWrite, Client: 5, Gen: 1, Res: ResCache, Op: op, Path: p, Data: data,
			ErrKind: outcome, Accepted: outcome == outcomeOK, Czxid: cz, Mzxid: mz, Version: v})
	}
	w(0.1, OpTreeCreate, "/c", "root", outcomeOK, 1, 1, 0)
	w(0.2, OpTreeCreate, "/c/a", "w1", outcomeOK, 2, 2, 0)
	w(1.0, OpTreeSet, "/c/a", "w2", outcomeOK, 2, 3, 1)
	w(1.1, OpTreeCreate, "/c/a/x", "w3", ErrKindConnectionLoss, 0, 0, 0) // applied, as the cache shows
	w(1.2, OpTreeCreate, "/c/b", "w4", outcomeNoNode, 0, 0, 0)           // refused
	w(1.3, OpTreeDelete, "/c/a/x", "", outcomeOK, 0, 0, 0)
	b.add(0.15, Event{Kind: KindCacheStart, Client: 6, Gen: 1, Res: ResCache, Holding: 900, Path: "/c"})
	b.cev(0.16, "created", "/c", "root", 1, 1, 0)
	b.cev(0.25, "created", "/c/a", "w1", 2, 2, 0)
	b.cev(0.26, "initialized", "/c", "", 0, 0, 0)
	b.cev(1.05, "changed", "/c/a", "w2", 2, 3, 1)
	b.cev(1.15, "created", "/c/a/x", "w3", 5, 5, 0)
	b.cev(1.35, "deleted", "/c/a/x", "w3", 5, 5, 0)
	b.add(100, Event{Kind: KindHealed, Client: -1})
	b.add(100.5, Event{Kind: KindQuiet, Client: 5, Res: ResCache, Path: "/c"})
	b.copy = []treeNode{{"/c", "root", 1, 1, 0}, {"/c/a", "w2", 2, 3, 1}}
	b.server = slices.Clone(b.copy)
	b.add(110, Event{Kind: KindScan, Client: -1})
	return &b
}

func (b *cacheHist) cev(t float64, op, p, data string, cz, mz int64, v int32) {
	b.add(t, Event{Kind: KindCacheEvent, Client: 6, Gen: b.gen, Res: ResCache, Holding: b.id, Op: op, Path: p, Data: data, Czxid: cz, Mzxid: mz, Version: v})
}

// snapshot records a snapshot of the cache at t: its copy (and, for the
// final one, the server's tree).
func (b *cacheHist) snapshot(t float64, of string, cp, server []treeNode) {
	for _, n := range cp {
		b.add(t, Event{Kind: KindCopyNode, Client: 6, Res: ResCache, Holding: b.id, Op: "cache", Path: n.path, Data: n.data, Czxid: n.czxid, Mzxid: n.mzxid, Version: n.version})
	}
	for _, n := range server {
		b.add(t, Event{Kind: KindCopyNode, Client: 6, Res: ResCache, Holding: b.id, Op: "server", Path: n.path, Data: n.data, Czxid: n.czxid, Mzxid: n.mzxid, Version: n.version})
	}
	b.add(t, Event{Kind: KindSnapshot, Client: 6, Res: ResCache, Holding: b.id, Op: of, Accepted: slices.Equal(cp, server)})
}

// restart starts the next cache (on the next session) at t, which loads
// the tree as it is from then on.
func (b *cacheHist) restart(t float64) {
	b.id, b.gen = b.id+1, b.gen+1
	b.add(t, Event{Kind: KindCacheStart, Client: 6, Gen: b.gen, Res: ResCache, Holding: b.id, Path: "/c"})
	b.cev(t+0.1, "created", "/c", "root", 1, 1, 0)
	b.cev(t+0.1, "created", "/c/a", "w2", 2, 3, 1)
	b.cev(t+0.2, "initialized", "/c", "", 0, 0, 0)
}

// done returns the history with the final snapshot at 101 s.
func (b *cacheHist) done() []Event {
	b.snapshot(101, "final", b.copy, b.server)
	return b.events()
}

func TestCheckCache(t *testing.T) {
	r := Check(newCacheHist().done(), testConfig)
	wantProps(t, r)
	if c := r.Counts.Cache; c.Caches != 1 || c.Events != 6 || c.Writes != 6 || c.Unconfirmed != 1 || c.Converged != sec(0.5) {
		t.Errorf("counts %+v", c)
	}
	cases := []struct {
		name   string
		change func(b *cacheHist)
		want   []string
		msg    string
	}{
		{"the same state twice", func(b *cacheHist) {
			b.cev(1.06, "changed", "/c/a", "w2", 2, 3, 1)
		}, []string{PropCache}, "a second time"},
		{"a deleted state created again", func(b *cacheHist) {
			b.cev(1.36, "created", "/c/a/x", "w3", 5, 5, 0)
			b.cev(1.37, "deleted", "/c/a/x", "w3", 5, 5, 0)
		}, []string{PropCache}, "a second time"},
		{"an older incarnation", func(b *cacheHist) {
			b.cev(1.36, "created", "/c/a/x", "w3", 4, 4, 0)
			b.cev(1.37, "deleted", "/c/a/x", "w3", 4, 4, 0)
		}, []string{PropCache}, "not above the incarnation"},
		{"an older version", func(b *cacheHist) {
			b.add(0.9, Event{Kind: KindTreeWrite, Client: 5, Gen: 1, Res: ResCache, Op: OpTreeSet, Path: "/c/a", Data: "w5",
				ErrKind: ErrKindConnectionLoss}) // its answer lost: applied before w2's
			b.cev(1.04, "changed", "/c/a", "w5", 2, 4, 2) // then w2's older version
		}, []string{PropCache}, "not a newer version"},
		{"a change before the initial load is complete", func(b *cacheHist) {
			b.cev(0.255, "changed", "/c/a", "w2", 2, 3, 1)
		}, []string{PropCache, PropCache}, "before CacheInitialized"},
		{"created under a missing parent", func(b *cacheHist) {
			b.cev(1.5, "created", "/c/b/y", "w3", 5, 5, 0)
		}, []string{PropCache, PropCache}, "parent is not in the copy"},
		{"a parent deleted before its child", func(b *cacheHist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindCacheEvent && e.Op == "deleted" })
			b.cev(1.35, "deleted", "/c/a", "w2", 2, 3, 1)
			b.cev(1.36, "deleted", "/c/a/x", "w3", 5, 5, 0)
			b.cev(1.37, "created", "/c/a", "w2", 2, 3, 1)
		}, []string{PropCache, PropCache}, "still holds /c/a/x below it"},
		{"a deletion of another state", func(b *cacheHist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindCacheEvent && e.Op == "deleted" })
			b.cev(1.35, "deleted", "/c/a/x", "w9", 5, 5, 0)
		}, []string{PropCache}, "but the copy held"},
		{"data no write had", func(b *cacheHist) {
			b.cev(1.06, "changed", "/c/a", "zz", 2, 4, 2)
		}, []string{PropCache, PropCache}, "no write to /c/a had"},
		{"the data of a refused write", func(b *cacheHist) {
			b.cev(1.5, "created", "/c/b", "w4", 6, 6, 0)
		}, []string{PropCache, PropCache}, "refused (nonode)"},
		{"another Stat than the write's", func(b *cacheHist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindCacheEvent && e.Op == "changed" })
			b.cev(1.05, "changed", "/c/a", "w2", 2, 4, 1)
			b.copy[1].mzxid, b.server[1].mzxid = 4, 4
		}, []string{PropCache}, "acknowledged with"},
		{"the stream is not the copy", func(b *cacheHist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindCacheEvent && e.Op == "changed" })
		}, []string{PropCache}, "not its copy at the final snapshot"},
		{"not converged", func(b *cacheHist) {
			b.server = append(b.server, treeNode{"/c/d", "w7", 9, 9, 0})
		}, []string{PropConverge}, "the server has /c/d, the copy not"},
		{"converged too late", func(b *cacheHist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindQuiet })
			b.add(94, Event{Kind: KindQuiet, Client: 5, Res: ResCache, Path: "/c"})
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindHealed })
			b.add(95, Event{Kind: KindHealed, Client: -1})
		}, []string{PropConverge}, "beyond the bound"},
		{"an event after the stream ended", func(b *cacheHist) {
			b.snapshot(2, "end", b.copy, nil)
			b.cev(2.5, "changed", "/c/a", "w2", 2, 3, 1)
			b.restart(3)
		}, []string{PropCache}, "after its stream ended"},
		{"a final snapshot after the end", func(b *cacheHist) {
			b.snapshot(2, "end", b.copy, nil)
		}, []string{PropConverge, PropHarness}, "0 final comparisons"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newCacheHist()
			c.change(b)
			r := Check(b.done(), testConfig)
			wantProps(t, r, c.want...)
			if !strings.Contains(r.Violations[0].Msg, c.msg) {
				t.Errorf("first violation %q, want one saying %q", r.Violations[0].Msg, c.msg)
			}
		})
	}
	t.Run("no final comparison", func(t *testing.T) {
		b := newCacheHist()
		wantProps(t, Check(b.events(), testConfig), PropConverge)
	})
	t.Run("end snapshot", func(t *testing.T) {
		// A cache that stopped with its session: its copy then is its
		// stream. The next one loads the tree again, and its final
		// snapshot is judged alone.
		b := newCacheHist()
		b.snapshot(2, "end", b.copy, nil)
		b.restart(3)
		r := Check(b.done(), testConfig)
		wantProps(t, r)
		if r.Counts.Cache.Caches != 2 {
			t.Errorf("caches %d, want 2", r.Counts.Cache.Caches)
		}
		// The same with the first cache's end copy short of a node.
		b = newCacheHist()
		b.snapshot(2, "end", b.copy[:1], nil)
		b.restart(3)
		wantProps(t, Check(b.done(), testConfig), PropCache)
	})
}

// nodeHist is a clean history of one PersistentNode: made on session 0x10
// with "d1", renewed on 0x11, given "d2" (acknowledged) and "d3" (failed),
// deleted by another client, and seen after the heal at 100 s.
func nodeHist(seen Event) []Event {
	var b hist
	p := "/n/pnode/c4"
	b.add(0.1, Event{Kind: KindNodeSession, Client: 4, Gen: 1, Res: ResNode, Path: p, Session: 0x10, Detail: "the client's"})
	b.add(0.2, Event{Kind: KindNodeSet, Client: 4, Gen: 1, Res: ResNode, Op: OpNodeCreate, Path: p, Data: "d1", Accepted: true})
	b.add(1, Event{Kind: KindNodeSet, Client: 4, Gen: 1, Res: ResNode, Op: OpNodeSetData, Path: p, Data: "d2", Accepted: true})
	b.add(2, Event{Kind: KindNodeDelete, Client: 5, Gen: 1, Res: ResNode, Path: p, Accepted: true})
	b.add(5, Event{Kind: KindNodeSession, Client: 4, Res: ResNode, Path: p, Session: 0x11, Detail: "renewed"})
	b.add(6, Event{Kind: KindNodeSet, Client: 4, Gen: 1, Res: ResNode, Op: OpNodeSetData, Path: p, Data: "d3", Accepted: false})
	b.add(100, Event{Kind: KindHealed, Client: -1})
	b.add(100.2, Event{Kind: KindQuiet, Client: 4, Res: ResNode, Path: p})
	if seen.Kind != 0 {
		seen.Client, seen.Res, seen.Path = 4, ResNode, p
		b.add(seen.At.Seconds(), seen)
	}
	b.add(110, Event{Kind: KindScan, Client: -1})
	return b.events()
}

func TestCheckPersistentNode(t *testing.T) {
	seen := func(at float64, exists bool, data string, owner int64) Event {
		return Event{Kind: KindNodeSeen, At: sec(at), Accepted: exists, Data: data, Session: owner}
	}
	for _, data := range []string{"d2", "d3"} { // d3's write may or may not have been applied
		r := Check(nodeHist(seen(101, true, data, 0x11)), testConfig)
		wantProps(t, r)
		if c := r.Counts.Node; c.Sets != 3 || c.Unconfirmed != 1 || c.Deletes != 1 || c.Renewals != 1 || c.Back != sec(1) {
			t.Errorf("counts %+v", c)
		}
	}
	cases := []struct {
		name string
		seen Event
		msg  string
	}{
		{"missing", seen(101, false, "", 0), "the node is missing"},
		{"stale data", seen(101, true, "d1", 0x11), `holds "d1", not "d2" or "d3"`},
		{"another session's", seen(101, true, "d2", 0x99), "owned by session 0x99"},
		{"too late", seen(106, true, "d2", 0x10), "beyond the bound"},
		{"never looked at", Event{}, "never looked at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(nodeHist(c.seen), testConfig)
			wantProps(t, r, PropNode)
			if !strings.Contains(r.Violations[0].Msg, c.msg) {
				t.Errorf("violation %q, want one saying %q", r.Violations[0].Msg, c.msg)
			}
		})
	}
}

func (b *hist) incr(t float64, res string, delta, value int64, out string) {
	b.add(t, Event{Kind: KindCounter, Client: 0, Gen: 1, Res: res, Op: OpAtomicAdd, Token: delta, Value: value, Accepted: out == outcomeOK, ErrKind: out})
}

func TestCheckCounter(t *testing.T) {
	// 0 +5 → 5 +3 → 8, then an unconfirmed +7 (applied), +2 → 17; a
	// failed +100 (not applied), an unconfirmed +50 (not applied).
	build := func(final int64, change func(b *hist)) []Event {
		var b hist
		b.incr(1, "c", 5, 5, outcomeOK)
		b.incr(2, "c", 3, 8, outcomeOK)
		b.incr(3, "c", 7, 0, outcomeUnconfirmed)
		b.incr(4, "c", 2, 17, outcomeOK)
		b.incr(5, "c", 100, 0, outcomeFailed)
		b.incr(6, "c", 50, 0, outcomeUnconfirmed)
		if change != nil {
			change(&b)
		}
		if final >= 0 {
			b.add(101, Event{Kind: KindCounterValue, Client: -1, Res: "c", Value: final, Accepted: true})
		}
		return b.finish()
	}
	r := Check(build(17, nil), testConfig)
	wantProps(t, r)
	if d := r.Counts.Data; d.Increments != 3 || d.Unconfirmed != 2 || d.Failed != 1 {
		t.Errorf("counts %+v", d)
	}
	wantProps(t, Check(build(67, nil), testConfig)) // the +50 applied too
	cases := []struct {
		name   string
		final  int64
		change func(b *hist)
		msg    string
	}{
		{"an acknowledged increment lost", 15, nil, "below 17"},
		{"an increment applied twice", 19, nil, "no set of the 2 unconfirmed ones makes the other 9"},
		{"two claim one range", 17, func(b *hist) { b.incr(2.5, "c", 4, 7, outcomeOK) }, "claim the same part of the count"},
		{"a range no increment owns", 21, func(b *hist) {
			// The acknowledged increments own 3..17; 0..3 and 17..21
			// are the unconfirmed ones' (5 and 2): together they make
			// the 7, but no set of them makes the 3 alone.
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindCounter })
			b.incr(1, "c", 5, 8, outcomeOK)
			b.incr(2, "c", 3, 11, outcomeOK)
			b.incr(3, "c", 6, 17, outcomeOK)
			b.incr(4, "c", 5, 0, outcomeUnconfirmed)
			b.incr(5, "c", 2, 0, outcomeUnconfirmed)
		}, "the count from 0 to 3, which no acknowledged increment made"},
		{"explained only by a failed increment", 117, nil, "counting the increments that failed"},
		{"never read", -1, nil, "never read after the heal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(build(c.final, c.change), testConfig)
			wantProps(t, r, PropCounter)
			if !strings.Contains(r.Violations[0].Msg, c.msg) {
				t.Errorf("violation %q, want one saying %q", r.Violations[0].Msg, c.msg)
			}
		})
	}
}

// queueHist is a clean history of a Queue ("q") and a LockingQueue
// (ResLQueue), drained after the heal.
func queueHist(change func(b *hist)) []Event {
	var b hist
	offer := func(t float64, res, data, out string) {
		b.add(t, Event{Kind: KindOffer, Client: 1, Gen: 1, Res: res, Data: data, Accepted: out == outcomeOK, ErrKind: out})
	}
	take := func(t float64, res, data, out string) {
		kind := KindTake
		if res == ResLQueue {
			kind = KindConsume
			b.hold(2, 1, res+"/"+data, Permit, 0, t-0.1, t-0.01)
		}
		b.add(t, Event{Kind: kind, Client: 2, Gen: 1, Res: res, Data: data, Accepted: out == outcomeOK, ErrKind: out})
	}
	offer(1, "q", "a", outcomeOK)
	offer(1.1, "q", "b", outcomeOK)
	offer(1.2, "q", "c", outcomeUnconfirmed) // added, as its take shows
	offer(1.3, "q", "d", outcomeFailed)
	offer(1.4, "q", "e", outcomeUnconfirmed) // not added
	take(2, "q", "a", outcomeOK)
	take(2.1, "q", "b", outcomeUnconfirmed) // deleted by this consumer or another
	take(2.2, "q", "c", outcomeOK)
	offer(1, ResLQueue, "x", outcomeOK)
	offer(1.1, ResLQueue, "y", outcomeOK)
	take(2, ResLQueue, "x", outcomeOK)
	take(2.5, ResLQueue, "y", outcomeFailed) // its lock was lost...
	take(3, ResLQueue, "y", outcomeOK)       // ...and another consumer got it
	if change != nil {
		change(&b)
	}
	b.add(105, Event{Kind: KindQueueScan, Client: -1, Res: "q", Accepted: true})
	b.add(105, Event{Kind: KindQueueScan, Client: -1, Res: ResLQueue, Accepted: true})
	return b.finish()
}

func TestCheckQueue(t *testing.T) {
	r := Check(queueHist(nil), testConfig)
	wantProps(t, r)
	if d := r.Counts.Data; d.Offers != 4 || d.OfferMaybe != 2 || d.Taken != 4 || d.TakeMaybe != 1 || d.Left != 0 {
		t.Errorf("counts %+v", d)
	}
	if r.Counts.Grants["lqueue"] != 3+2 { // and one an item after the heal, by finish
		t.Errorf("grants %v", r.Counts.Grants)
	}
	left := func(res, data, lock string) func(b *hist) {
		return func(b *hist) { b.add(104, Event{Kind: KindQueueLeft, Client: -1, Res: res, Data: data, Detail: lock}) }
	}
	cases := []struct {
		name   string
		change func(b *hist)
		want   []string
		msg    string
	}{
		{"taken twice", func(b *hist) {
			b.add(3, Event{Kind: KindTake, Client: 3, Gen: 1, Res: "q", Data: "a", Accepted: true})
		}, []string{PropQueue}, `item "a" taken a second time`},
		{"consumed twice", func(b *hist) {
			b.add(4, Event{Kind: KindConsume, Client: 3, Gen: 1, Res: ResLQueue, Data: "x", Accepted: true})
		}, []string{PropQueue}, `item "x" consumed a second time`},
		{"lost", func(b *hist) {
			b.ev = slices.DeleteFunc(b.ev, func(e Event) bool { return e.Kind == KindTake && e.Data == "a" })
		}, []string{PropQueue}, `item "a", offered (acknowledged), was never taken and is not in the queue: lost`},
		{"taken, never offered", func(b *hist) {
			b.add(3, Event{Kind: KindTake, Client: 3, Gen: 1, Res: "q", Data: "z", Accepted: true})
		}, []string{PropQueue}, `item "z" was taken, yet never offered`},
		{"the item of a failed offer", func(b *hist) {
			b.add(3, Event{Kind: KindTake, Client: 3, Gen: 1, Res: "q", Data: "d", Accepted: true})
		}, []string{PropQueue}, "offered only by an Offer that failed"},
		{"left after the drain", left("q", "e", ""), []string{PropQueue}, `item "e" is still in the queue after the drain`},
		{"left, locked", left(ResLQueue, "y", "locked by session 0x5 (c2/1, a live session)"), []string{PropQueue}, "consumed, yet is still in the queue"},
		{"never listed", func(b *hist) {
			b.add(1, Event{Kind: KindOffer, Client: 1, Gen: 1, Res: "q2", Data: "m", Accepted: true})
		}, []string{PropQueue}, "q2: never listed after the drain"},
		{"two consumers on one item", func(b *hist) {
			b.hold(3, 1, ResLQueue+"/y", Permit, 0, 2.45, 2.7) // while consumer 2 still held it
		}, []string{PropExclusion}, "lqueue/y"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(queueHist(c.change), testConfig)
			wantProps(t, r, c.want...)
			if !strings.Contains(r.Violations[0].Msg, c.msg) {
				t.Errorf("violation %q, want one saying %q", r.Violations[0].Msg, c.msg)
			}
		})
	}
}
