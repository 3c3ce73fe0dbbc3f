package nemesis

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The user's checker (CheckUser, which package zktest/faulttest runs) on
// hand-made histories: each breaks (or, as a control, keeps) one property.

// userHold records a user's grant at t1 (Lost open) and its release at
// t2 (none if t2 < 0).
func (b *hist) userHold(client int, gen int32, res string, mode Mode, token int64, t1, t2 float64) int32 {
	id := b.hold(client, gen, res, mode, token, t1, t2)
	for i := range b.ev {
		if b.ev[i].Kind == KindGrant && b.ev[i].Holding == id {
			b.ev[i].Work, b.ev[i].Op = userWork, OpUserGrant
		}
	}
	return id
}

// told records that the runner saw holding id's Lost close at t.
func (b *hist) told(t float64, client int, gen int32, id int32) {
	b.add(t, Event{Kind: KindLostSeen, Client: client, Gen: gen, Holding: id})
}

// userFinish adds what a user's run ends with: each client's workload at
// 0, a heal at 100 s, an operation by each client after it, a clean scan.
func (b *hist) userFinish(clients ...int) []Event {
	b.add(100, Event{Kind: KindHealed, Client: -1})
	for i, c := range clients {
		b.add(0, Event{Kind: KindUserWork, Client: c})
		b.add(101+float64(i)*0.01, Event{Kind: KindUserOp, Client: c, Res: "k", Data: "v"})
	}
	b.add(110, Event{Kind: KindScan, Client: -1})
	return b.events()
}

// A correct workload: holdings in turn, writes inside them with rising
// tokens, a loss noticed right after the runner saw it, the successor
// granted later: no violation.
func TestUserCheckCorrect(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	a := b.userHold(0, 1, "r", Exclusive, 10, 1, 2)
	b.write(1.5, 0, "r", a, 10, true)
	c := b.userHold(1, 1, "r", Exclusive, 11, 2.5, -1)
	b.write(2.6, 1, "r", c, 11, true)
	b.told(3, 1, 1, c)
	b.write(3.1, 1, "r", c, 11, true) // inside the margin: the holder had not seen it yet
	b.lost(3.2, c)
	b.sessionEnd(6.5, 1, 1, ErrKindSessionExpired, 3)
	d := b.userHold(0, 1, "r", Exclusive, 12, 6.6, 7)
	b.write(6.8, 0, "r", d, 12, true)
	r := CheckUser(b.userFinish(0, 1), testConfig)
	wantProps(t, r)
}

// A holder that ignores Lost: it writes long after its Lost closed (lost)
// and still holds when a successor is granted (exclusion).
func TestUserCheckIgnoredLost(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	a := b.userHold(0, 1, "r", Exclusive, 10, 1, 6)
	b.told(2, 0, 1, a)
	b.write(2.1, 0, "r", a, 10, true) // inside the margin
	b.write(4, 0, "r", a, 10, true)   // 2 s after: beyond the 1.5 s margin
	b.write(4.5, 0, "r", a, 10, true) // reported once per holding
	b.sessionEnd(4.8, 0, 1, ErrKindSessionExpired, 1.9)
	c := b.userHold(1, 1, "r", Exclusive, 11, 5, 5.5)
	b.write(5.1, 1, "r", c, 11, true)
	b.write(5.2, 0, "r", a, 10, false) // refused by the fence: no fence violation
	r := CheckUser(b.userFinish(0, 1), testConfig)
	wantProps(t, r, PropLost, PropExclusion)
}

// Without strict mode, a server expiry excuses an overlap only while the
// holder could not know: not once its Lost had closed more than half its
// timeout before the successor's grant.
func TestUserCheckToldRemovesExcuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		told float64
		want []string
	}{
		{"told-late", 3.0, nil},                      // 4.2 < 3.0 + 1.5: excused by the expiry
		{"told-early", 2.0, []string{PropExclusion}}, // 4.2 > 2.0 + 1.5
		{"never-told", -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b hist
			b.session(0, 0, 1, false, 3)
			b.session(0, 1, 1, false, 3)
			a := b.userHold(0, 1, "r", Exclusive, 10, 0.5, 6)
			if tc.told >= 0 {
				b.told(tc.told, 0, 1, a)
			}
			b.sessionEnd(4.5, 0, 1, ErrKindSessionExpired, 1.0)
			b.userHold(1, 1, "r", Exclusive, 11, 4.2, 5)
			r := CheckUser(b.userFinish(0, 1), testConfig)
			wantProps(t, r, tc.want...)
		})
	}
}

// The schedule's forced expiry excuses an overlap the same way.
func TestUserCheckForcedToldNoExcuse(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	a := b.userHold(0, 1, "r", Exclusive, 10, 0.5, 9)
	b.forced(1, 0, 1)
	b.sessionEnd(1.1, 0, 1, ErrKindSessionExpired, 0.9)
	b.told(1.1, 0, 1, a)
	b.userHold(1, 1, "r", Exclusive, 11, 1.2, 2) // excused: within the margin of being told
	b.userHold(1, 1, "r", Exclusive, 12, 5, 6)   // not: the holder was told at 1.1
	r := CheckUser(b.userFinish(0, 1), testConfig)
	wantProps(t, r, PropExclusion)
	if r.Counts.ExcusedForced != 1 {
		t.Errorf("excused forced overlaps %d, want 1", r.Counts.ExcusedForced)
	}
}

// Tokens must rise between exclusive holdings, in grant order.
func TestUserCheckTokens(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	b.userHold(0, 1, "r", Exclusive, 10, 1, 2)
	b.userHold(1, 1, "r", Exclusive, 9, 3, 4)
	b.userHold(0, 1, "r", Shared, 20, 5, 6)
	b.userHold(1, 1, "r", Shared, 20, 5.5, 6.5) // shared ones may share a token
	r := CheckUser(b.userFinish(0, 1), testConfig)
	wantProps(t, r, PropToken)
}

// Fenced writes: a store that accepted a lower token after a higher one,
// one that refused a valid token, and a write after the release.
func TestUserCheckFence(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.session(0, 1, 1, true, 3)
	a := b.userHold(0, 1, "r", Exclusive, 10, 1, 2)
	c := b.userHold(1, 1, "r", Exclusive, 11, 3, 8)
	b.write(3.5, 1, "r", c, 11, true)
	b.write(4, 0, "r", a, 10, true)  // accepted below 11: the fence is broken; and after a's release
	b.write(5, 1, "r", c, 11, false) // refused at the highest: broken too
	r := CheckUser(b.userFinish(0, 1), testConfig)
	wantProps(t, r, PropRegister, PropHarness, PropRegister)
}

// Progress: every client acts (a grant or an operation) after the heal.
func TestUserCheckProgress(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.add(0, Event{Kind: KindUserWork, Client: 2}) // never acts after the heal
	b.userHold(2, 1, "r", Exclusive, 10, 101, 102)
	b.ev[len(b.ev)-2].Empty = true // an empty grant is not progress
	r := CheckUser(b.userFinish(0), testConfig)
	wantProps(t, r, PropProgress)

	var late hist
	late.add(0, Event{Kind: KindUserWork, Client: 3})
	late.add(107, Event{Kind: KindUserOp, Client: 3, Res: "k"}) // beyond the 5 s bound
	r = CheckUser(late.userFinish(), testConfig)
	wantProps(t, r, PropProgress)
}

// Errors: the workload's own errors of no fault's kind, and records of a
// resource never acquired, break "error"; a fault's kind does not.
func TestUserCheckErrors(t *testing.T) {
	var b hist
	b.session(0, 0, 1, true, 3)
	b.add(1, Event{Kind: KindError, Client: 0, Gen: 1, Op: OpUserWorkload, ErrKind: ErrKindSessionExpired, Detail: "expired"})
	b.add(2, Event{Kind: KindError, Client: 0, Gen: 1, Op: OpUserWorkload, Detail: "balance went negative"})
	b.add(3, Event{Kind: KindError, Client: 0, Gen: 1, Res: "x", Op: OpUserMisuse, Detail: `Released("x") without an Acquired of it before`})
	r := CheckUser(b.userFinish(0), testConfig)
	wantProps(t, r, PropError, PropError)
}

// Leftovers: what the scan of a user's run reports.
func TestUserLeftover(t *testing.T) {
	for _, tc := range []struct {
		path  string
		owner int64
		want  bool
	}{
		{"/b/orders", 0, false},                      // a recipe's container, or the user's data
		{"/b/orders/_c_1f-lock-0000000003", 0, true}, // a lock node outliving its session's close
		{"/b/orders/member", 0x1234, true},           // any ephemeral
		{"/b/queue/item-0000000012", 0, true},        // a queue item left
		{"/b/x0000000012y", 0, false},
		{"/b/1", 0, false},
	} {
		if got := userLeftover(tc.path, zkclient.Stat{EphemeralOwner: tc.owner}); got != tc.want {
			t.Errorf("userLeftover(%s, owner 0x%x) = %v, want %v", tc.path, tc.owner, got, tc.want)
		}
	}
}
