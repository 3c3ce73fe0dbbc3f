package bench

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// The servers' own counts cover the timed part of a run and nothing else:
// a floor chain's handoffs are one delete each and no read (the waiters'
// creates, watches and sessions come before), floor+listing adds its one
// listing per handoff, and an uncontended Mutex writes what a raw
// create+delete pair writes (and reads twice: its listing and its hold
// watch): what its first Lock on a new path writes once (its parents; with
// grants, the session's grants directory) comes before. On zkserver,
// which has no such counters, the figures are unknown.
func TestServerRequests(t *testing.T) {
	c := zktest.StartT(t, zktest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
	defer cancel()
	// Two chain rounds of five: 8 handoffs, 10 releases.
	const contenders, acquisitions, releases = 5, 8, 10
	for _, tc := range []struct {
		recipe     string
		contenders int
		chain      bool
		reads      int // at least, and at most `contenders`+2 more (pings, set-up)
		writes     int // exactly
	}{
		{"floor", contenders, true, 0, releases},
		{"floor+listing", contenders, true, 2 * (contenders - 1), releases},
		// A chain's timed part starts once every waiter has queued: its
		// writes are the releases alone, with grants too (one multi
		// each). Each handoff reads the listing and the new holder's
		// watch on its node; with grants, only the first of a round
		// lists (the first holder knew nobody after it).
		{"zkrecipes", contenders, true, 2 * 2 * (contenders - 1), releases},
		{"zkrecipes-grant", contenders, true, 2*(contenders-1) + 2, releases},
		// One round of 50 (the harness once started timing while
		// waiters with grants were still queueing): 49 holders' watches,
		// and a listing by one waiter in ten (the first holder knew
		// nobody; a listing waiter grants on to nine, the last of whom
		// knows nobody after it).
		{"zkrecipes-grant", 50, true, 49 + 5, 50},
		{"floor", 1, false, 0, 2 * acquisitions},
		{"zkrecipes", 1, false, 2 * acquisitions, 2 * acquisitions},
		{"zkrecipes-grant", 1, false, 2 * acquisitions, 2 * acquisitions},
		// Requeue: one multi (delete, create) per acquisition and the
		// last release.
		{"zkrecipes-requeue", 1, false, 2 * acquisitions, acquisitions + 1},
	} {
		acq := acquisitions
		if tc.contenders > acquisitions {
			acq = tc.contenders - 1 // one round
		}
		r, err := Run(ctx, tc.recipe, Config{
			Servers: c.Addrs(), Path: fmt.Sprintf("/bench-requests/%s-%d", tc.recipe, tc.contenders),
			Contenders: tc.contenders, Acquisitions: acq, Chain: tc.chain,
			Requests: ServerRequests(c.Addrs()),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Acquisitions != acq {
			t.Fatalf("%s: %d acquisitions, want %d", tc.recipe, r.Acquisitions, acq)
		}
		reads, writes := math.Round(r.ServerReads*float64(acq)), math.Round(r.ServerWrites*float64(acq))
		if c.Embedded() {
			if r.ServerReads != -1 || r.ServerWrites != -1 {
				t.Errorf("%s on zkserver: server reads, writes per acquisition %v, %v; want -1, -1 (not counted)", tc.recipe, r.ServerReads, r.ServerWrites)
			}
			continue
		}
		if writes != float64(tc.writes) || reads < float64(tc.reads) || reads > float64(tc.reads+tc.contenders+2) {
			t.Errorf("%s with %d contenders: the server counted %v reads and %v writes, want %d (or a few more) and %d",
				tc.recipe, tc.contenders, reads, writes, tc.reads, tc.writes)
		}
	}
}
