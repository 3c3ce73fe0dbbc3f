package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestInspect(t *testing.T) {
	proxy := zktest.NewProxyT(t, servers(t))
	path := testPath(t, "lock")

	// The holder talks through the proxy; cutting it leaves its session
	// alive on the server (30s timeout) but connected nowhere: its node
	// is an orphan until the session expires.
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{proxy.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Refuse(false)
		s.Close()
	})
	if err := zkrecipes.NewMutex(s, path).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	conn := admin(t)
	waiter := start(t, nil, "lock", "--id", "waiter-1", path, "--", "true")
	eventually(t, 10*time.Second, "zkr lock did not queue", func() bool { return len(children(t, conn, path)) == 2 })

	r := zkr(t, "inspect", path)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d; stderr %q", r.code, r.stderr)
	}
	t.Logf("inspect:\n%s", r.stdout)
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], path+": lock, 2 in queue") || len(lines) < 4 {
		t.Fatalf("unexpected report:\n%s", r.stdout)
	}
	holder, next := strings.Fields(lines[2]), strings.Fields(lines[3])
	if holder[0] != "#1" || holder[1] != "holds" || holder[5] != sessionHex(s) {
		t.Errorf("first line should be the test's session holding: %q", lines[2])
	}
	if next[0] != "#2" || next[1] != "waits" || next[3] != "#1" || !strings.Contains(lines[3], "waiter-1") {
		t.Errorf("second line should be zkr (--id waiter-1) waiting for #1: %q", lines[3])
	}
	if strings.Contains(r.stdout, "ORPHANED") {
		t.Errorf("nobody is orphaned yet:\n%s", r.stdout)
	}

	proxy.Refuse(true)
	proxy.Cut()
	eventually(t, 10*time.Second, "the cut holder is not flagged as orphaned", func() bool {
		r = zkr(t, "inspect", path)
		lines = strings.Split(r.stdout, "\n")
		return len(lines) > 3 && strings.Contains(lines[2], "ORPHANED?") && !strings.Contains(lines[3], "ORPHANED")
	})

	r = zkr(t, "inspect", path, "--json")
	var in inspection
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	if len(in.Contenders) != 2 || !in.SessionsKnown || in.Contenders[0].Orphaned == nil || !*in.Contenders[0].Orphaned ||
		in.Contenders[1].State != "waits" || in.Contenders[1].WaitsFor != 1 {
		t.Errorf("inspect --json: %+v", in)
	}
	if waiter.exited() {
		t.Errorf("zkr lock stopped waiting: %s", waiter.stderr.String())
	}
}

func TestInspectElection(t *testing.T) {
	servers(t)
	path := testPath(t, "election")
	conn := admin(t)
	start(t, nil, "elect", path, "--id", "first", "--", "sleep", "60")
	eventually(t, 10*time.Second, "no candidate", func() bool { return len(children(t, conn, path)) == 1 })
	start(t, nil, "elect", path, "--id", "second", "--", "sleep", "60")
	eventually(t, 10*time.Second, "no second candidate", func() bool { return len(children(t, conn, path)) == 2 })
	r := zkr(t, "inspect", path)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], path+": election, 2 in queue") {
		t.Fatalf("unexpected report:\n%s", r.stdout)
	}
	if f := strings.Fields(lines[2]); f[1] != "leads" || f[2] != "candidate" || f[4] != "first" {
		t.Errorf("first line should be the leader, id first: %q", lines[2])
	}
	if f := strings.Fields(lines[3]); f[1] != "waits" || f[4] != "second" {
		t.Errorf("second line should be a candidate, id second: %q", lines[3])
	}
	if r := zkr(t, "inspect", testPath(t, "nothing")); r.code != 0 || !strings.Contains(r.stdout, "does not exist") {
		t.Errorf("inspecting a missing path: exit %d, %q", r.code, r.stdout)
	}
}

// sessionHex is how inspect shows the session's id.
func sessionHex(s *zkrecipes.Session) string {
	return fmt.Sprintf("0x%x", s.ID())
}
