package zkrecipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// TestElectionValue: a leader advertises the value it campaigned with, and
// what it proclaims while leading; Leader, Observe and the node's data
// follow. Only the leader may proclaim, and not once its leadership is
// lost (node deleted, session expired).
func TestElectionValue(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	obs := zkrecipes.NewElection(e.session(), path, "observer")
	seen, err := obs.Observe(ctx)
	must(t, err, "Observe")
	defer seen.Close()
	next := func(want string) {
		t.Helper()
		got, err := nextWithin(seen, 20*time.Second)
		if err != nil || got != want {
			t.Fatalf("Observe delivered %q (%v), want %q", got, err, want)
		}
	}
	leader := func(want string) {
		t.Helper()
		if got, err := obs.Leader(ctx); err != nil || got != want {
			t.Errorf("Leader() = %q, %v; want %q", got, err, want)
		}
	}
	nodeData := func() string {
		t.Helper()
		kids := e.children(path)
		if len(kids) == 0 {
			t.Fatal("no election node")
		}
		d, _, err := e.admin.Get(path + "/" + kids[0])
		must(t, err, "get the node")
		return string(d)
	}
	next("")

	sa := e.session()
	a := zkrecipes.NewElection(sa, path, "a")
	if err := a.Proclaim(ctx, "x"); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Proclaim before campaigning = %v, want ErrNotHeld", err)
	}
	must(t, a.CampaignValue(ctx, "10.0.0.1:80"), "a: CampaignValue")
	next("10.0.0.1:80")
	leader("10.0.0.1:80")
	if d := nodeData(); d != "10.0.0.1:80" {
		t.Errorf("leader's node data %q, want its value", d)
	}

	// A waiting candidate may not proclaim; the leader may, and everyone
	// sees it.
	b := zkrecipes.NewElection(e.session(), path, "b")
	bdone := async(func() error { return b.Campaign(ctx) })
	e.waitFor("b to queue", func() bool { return len(e.children(path)) == 2 })
	if err := b.Proclaim(ctx, "b's"); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Proclaim by a waiting candidate = %v, want ErrNotHeld", err)
	}
	must(t, a.Proclaim(ctx, "10.0.0.1:81"), "a: Proclaim")
	next("10.0.0.1:81")
	leader("10.0.0.1:81")
	select {
	case <-a.Lost():
		t.Fatal("Proclaim ended the leadership")
	default:
	}
	blocked(t, bdone, "b's Campaign")
	if err := a.Proclaim(ctx, ""); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Proclaim of an empty value = %v, want ErrInvalidArgument", err)
	}

	// Handover: b advertises its id (plain Campaign).
	must(t, a.Resign(ctx), "a: Resign")
	if err := a.Proclaim(ctx, "late"); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Proclaim after Resign = %v, want ErrNotHeld", err)
	}
	must(t, result(t, bdone, "b's Campaign"), "b: Campaign")
	next("b")
	leader("b")

	// b's node is deleted by someone else: b's Lost closes and it may no
	// longer proclaim.
	kids := e.children(path)
	must(t, e.admin.Delete(path+"/"+kids[0], -1), "delete b's node")
	closed(t, b.Lost(), "b's Lost after its node was deleted")
	if err := b.Proclaim(ctx, "ghost"); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Proclaim after the node was deleted = %v, want ErrNotHeld", err)
	}
	next("")
	must(t, b.Resign(ctx), "b: Resign")

	// a leads again with its id, then its session expires.
	must(t, a.Campaign(ctx), "a: Campaign")
	next("a")
	e.expire(sa)
	closed(t, a.Lost(), "a's Lost after expiry")
	if err := a.Proclaim(ctx, "after"); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Proclaim after expiry = %v, want ErrSessionExpired", err)
	}
	next("")
	if err := a.CampaignValue(ctx, ""); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("CampaignValue with an empty value = %v, want ErrInvalidArgument", err)
	}
	e.empty(path)
}

// TestElectionValueBusy: of two CampaignValue calls on one Election at once,
// one is refused with ErrBusy, and the node advertises the value of the
// other; a cancelled CampaignValue leaves no node.
func TestElectionValueBusy(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	for range 20 {
		el := zkrecipes.NewElection(s, path, "p")
		x := async(func() error { return el.CampaignValue(ctx, "x") })
		y := async(func() error { return el.CampaignValue(ctx, "y") })
		ex, ey := result(t, x, "x"), result(t, y, "y")
		want := "x"
		switch {
		case ex == nil && errors.Is(ey, zkrecipes.ErrBusy):
		case ey == nil && errors.Is(ex, zkrecipes.ErrBusy):
			want = "y"
		default:
			t.Fatalf("two CampaignValue at once: %v and %v; want one nil, one ErrBusy", ex, ey)
		}
		if got, err := el.Leader(ctx); err != nil || got != want {
			t.Errorf("Leader() = %q, %v; want %q, the value of the call that won", got, err, want)
		}
		must(t, el.Resign(ctx), "Resign")
	}

	holder := zkrecipes.NewElection(e.session(), path, "holder")
	must(t, holder.Campaign(ctx), "holder: Campaign")
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := zkrecipes.NewElection(e.session(), path, "w").CampaignValue(cctx, "v"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CampaignValue behind a leader = %v, want DeadlineExceeded", err)
	}
	if kids := e.children(path); len(kids) != 1 {
		t.Errorf("after a cancelled CampaignValue: %v, want the holder's node only", kids)
	}
	must(t, holder.Resign(ctx), "holder: Resign")
	e.empty(path)
}
