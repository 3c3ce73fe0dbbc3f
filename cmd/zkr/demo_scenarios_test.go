package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// The scenarios of zkr demo, each at a small size on the embedded server,
// asserting the direction of its result.

// demoJSON runs zkr demo with args on the embedded server and decodes its
// --json output into v.
func demoJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	p := start(t, []string{"ZKR_SERVERS="}, append([]string{"demo"}, append(args, "--json")...)...)
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("zkr demo %q: exit %d; stderr:\n%s", args, code, p.stderr.String())
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), v); err != nil {
		t.Fatalf("zkr demo %q --json: %v\n%s", args, err, p.stdout.String())
	}
	if !strings.Contains(p.stderr.String(), "embedded ZooKeeper-compatible server") {
		t.Errorf("zkr demo %q does not say which server it runs on:\n%s", args, p.stderr.String())
	}
}

// TestDemoRace: under the widened gap, the hand-rolled lock hangs waiters
// whose predecessor went away before the watch; zkrecipes' Mutex, whose
// predecessor also went away in the gap, never hangs.
func TestDemoRace(t *testing.T) {
	var rep raceReport
	demoJSON(t, &rep, "race", "--waiters", "6", "--gap", "100ms", "--hang-after", "600ms")
	t.Logf("%+v", rep.Rows)
	if len(rep.Rows) != 2 || rep.Rows[0].Recipe != recipeOurs || rep.Rows[1].Recipe != recipeNaive {
		t.Fatalf("rows %+v, want zkrecipes then naive", rep.Rows)
	}
	ours, naive := rep.Rows[0], rep.Rows[1]
	if ours.Waiters != 6 || naive.Waiters != 6 {
		t.Errorf("waiters %d and %d, want 6 each", ours.Waiters, naive.Waiters)
	}
	if ours.InGap == 0 {
		t.Errorf("no zkrecipes waiter found its predecessor gone at the watch: the gap was not widened for it, the test proves nothing")
	}
	if ours.Hung != 0 {
		t.Errorf("%d of zkrecipes' waiters hung", ours.Hung)
	}
	if naive.Hung == 0 || naive.Hung > naive.InGap {
		t.Errorf("hand-rolled lock: %d hung, %d released in the gap; want some hung, each of them released in the gap", naive.Hung, naive.InGap)
	}
	for _, tr := range rep.Trials {
		if tr.Hung && !tr.InGap {
			t.Errorf("trial %+v hung without its predecessor going in the gap", tr)
		}
	}
}

// TestDemoCrash: after the holder's traffic is blackholed, the next holder
// gets the lock once the session expires (within the timeout and a bound),
// one waiter is told with the predecessor watch and all with the parent
// watch, and the fenced resource refuses the old holder's late write.
func TestDemoCrash(t *testing.T) {
	var rep crashReport
	// The session timeouts scale: the lower bound below holds only while
	// the holder's client pings in time (every third of the timeout), and a
	// starved machine delays its pings; the server may then expire the
	// session sooner after the blackhole than a timeout.
	timeouts := zktest.Bound(600*time.Millisecond).String() + "," + zktest.Bound(1200*time.Millisecond).String()
	demoJSON(t, &rep, "crash", "--timeouts", timeouts, "--waiters", "2")
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4 (2 timeouts x 2 recipes)", len(rep.Runs))
	}
	for _, run := range rep.Runs {
		t.Logf("%s %v: next holder after %v (told %v), deleted %+v, waiters %+v, late write %s",
			run.Recipe, run.Granted, run.NextHolder, run.ToldLost, run.Deleted, run.Notified, run.LateWrite)
		// The server expires the session a timeout after it last heard
		// from the holder, which pings every third of it.
		// Granted/2 is a lower bound, not scaled; the slack above the
		// timeout is an upper bound, scaled.
		if slack := zktest.Bound(2 * time.Second); run.NextHolder < run.Granted/2 || run.NextHolder > run.Granted+slack {
			t.Errorf("%s, timeout %v: next holder after %v, want within the timeout (and a bound of %v)", run.Recipe, run.Granted, run.NextHolder, slack)
		}
		if len(run.Deleted) != 1 || run.Deleted[0].Owner != "A" || run.Deleted[0].Node != run.HolderNode {
			t.Errorf("%s: deleted %+v, want A's node %s alone", run.Recipe, run.Deleted, run.HolderNode)
		}
		if run.Next != "W1" {
			t.Errorf("%s: next holder %s, want W1", run.Recipe, run.Next)
		}
		woken := 0
		for _, n := range run.Notified {
			if n.Events > 0 {
				woken++
			}
		}
		switch run.Recipe {
		case recipeOurs:
			if woken != 1 || run.Notified[0].Events != 1 {
				t.Errorf("zkrecipes: waiters told %+v, want W1 alone, with one event", run.Notified)
			}
			if run.LateWrite != "refused" || run.Register != "W1" || run.OldToken >= run.NewToken {
				t.Errorf("zkrecipes: late write %s (tokens %d, then %d), register %q; want refused, W1's value kept", run.LateWrite, run.OldToken, run.NewToken, run.Register)
			}
			if run.ToldLost <= 0 || run.ToldLost >= run.NextHolder {
				t.Errorf("zkrecipes: the old holder was told after %v, want before the next holder (%v)", run.ToldLost, run.NextHolder)
			}
		case recipeNaive:
			if woken != 2 {
				t.Errorf("hand-rolled: waiters told %+v, want both", run.Notified)
			}
			if run.LateWrite != "accepted" {
				t.Errorf("hand-rolled: late write %s, want accepted (no token)", run.LateWrite)
			}
		}
	}
}

// TestDemoWatches: the persistent watcher handles every change, queued;
// the one-shot watcher fewer, yet both end on the last value.
func TestDemoWatches(t *testing.T) {
	var rep watchesReport
	demoJSON(t, &rep, "watches", "--changes", "60", "--interval", "0s", "--work", "5ms")
	if len(rep.Runs) != 2 || rep.Runs[0].Watcher != watchOneShot || rep.Runs[1].Watcher != watchPersistent {
		t.Fatalf("watchers %+v, want one-shot then persistent", rep.Runs)
	}
	one, per := rep.Runs[0], rep.Runs[1]
	t.Logf("one-shot %+v\npersistent %+v", one, per)
	if per.Events != 60 || per.Queued == 0 {
		t.Errorf("persistent: %d notifications, %d queued at the last write; want all 60, some queued", per.Events, per.Queued)
	}
	if one.Events >= 60 || one.ValuesSeen >= 60 {
		t.Errorf("one-shot: %d notifications, %d values seen; want fewer than the 60 changes", one.Events, one.ValuesSeen)
	}
	if one.Final != 60 || per.Final != 60 {
		t.Errorf("believed at the end: one-shot %d, persistent %d; want 60", one.Final, per.Final)
	}
}

// TestDemoElection: one watch event per failover with the chain, N-1 when
// every candidate watches the leader.
func TestDemoElection(t *testing.T) {
	var rep electionReport
	demoJSON(t, &rep, "election", "--candidates", "5", "--failovers", "3")
	if len(rep.Runs) != 2 {
		t.Fatalf("runs %+v, want 2", rep.Runs)
	}
	for _, run := range rep.Runs {
		t.Logf("%s: %+v", run.Recipe, run.Failovers)
		if len(run.Failovers) != 3 {
			t.Errorf("%s: %d failovers, want 3", run.Recipe, len(run.Failovers))
		}
		want := int64(1)
		if run.Recipe == recipeNaive {
			want = 4
		}
		for _, f := range run.Failovers {
			if f.Events != want || f.Listings != want || f.NewLeader <= 0 {
				t.Errorf("%s: failover %+v, want %d events and listings", run.Recipe, f, want)
			}
		}
	}
}

// TestDemoPayload: both sizes are written, and the limit is enforced by
// the client, then (its check lifted) by the server.
func TestDemoPayload(t *testing.T) {
	var rep payloadReport
	demoJSON(t, &rep, "payload", "--writes", "8", "--writers", "2")
	if !rep.Embedded || rep.Members != 1 {
		t.Errorf("embedded %v, members %d: want the embedded single node", rep.Embedded, rep.Members)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Size != 1024 || rep.Runs[1].Size != 400*1024 {
		t.Fatalf("runs %+v, want 1 KB then 400 KB", rep.Runs)
	}
	for _, run := range rep.Runs {
		if run.Writes != 8 || run.Written != int64(8*run.Size) || run.PerSecond <= 0 || run.ToFollowers != 0 {
			t.Errorf("implausible run %+v", run)
		}
	}
	want := []string{"accepted", "refused by the client", "refused by the server"}
	if len(rep.Attempts) != len(want) {
		t.Fatalf("attempts %+v, want %d", rep.Attempts, len(want))
	}
	for i, a := range rep.Attempts {
		if !strings.HasPrefix(a.Result, want[i]) {
			t.Errorf("%d bytes (client limit %d): %q, want %q", a.Size, a.ClientLimit, a.Result, want[i])
		}
	}
	if !strings.Contains(rep.Attempts[2].Result, "no node made") {
		t.Errorf("after the server's refusal: %q, want no node and the session back", rep.Attempts[2].Result)
	}
}

// TestDemoAll writes one report with every scenario and its plots.
func TestDemoAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	p := start(t, []string{"ZKR_SERVERS="}, "demo", "all", "--quick", "--out", dir)
	if code := p.wait(time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"herd", "race", "crash", "watches", "election", "payload"} {
		if !strings.Contains(string(md), "`zkr demo "+s+"`") {
			t.Errorf("report.md has no section for %s", s)
		}
		if !strings.Contains(p.stdout.String(), "== "+s+" ==") {
			t.Errorf("stdout has no table for %s", s)
		}
	}
	for _, s := range []string{"herd", "race", "crash", "watches"} {
		b, err := os.ReadFile(filepath.Join(dir, s+".svg"))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Errorf("%s.svg: %v", s, err)
		}
		if !strings.Contains(string(md), "("+s+".svg)") {
			t.Errorf("report.md does not show %s.svg", s)
		}
	}
	t.Logf("report.md:\n%s", md)
}

// TestDemoUsage: an unknown scenario and bad sizes are bad input.
func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "nosuch"},
		{"demo", "race", "--waiters", "0"},
		{"demo", "crash", "--timeouts", "2s,x"},
		{"demo", "election", "--candidates", "1"},
		{"demo", "watches", "--plot", "w.txt"},
	} {
		r := zkr(t, args...)
		if r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; stderr:\n%s", args, r.code, exitUsage, r.stderr)
		}
		oneLineError(t, r)
	}
}
