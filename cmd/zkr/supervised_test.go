package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// started is a command started by zkr under --requeue, as it announced
// itself on stdout: "token N pid P".
type started struct {
	token int64
	pid   int
}

var startedLine = regexp.MustCompile(`(?m)^token (\d+) pid (\d+)$`)

// starts returns the commands announced on out so far, in order.
func starts(out string) []started {
	var ss []started
	for _, m := range startedLine.FindAllStringSubmatch(out, -1) {
		tok, _ := strconv.ParseInt(m[1], 10, 64)
		pid, _ := strconv.Atoi(m[2])
		ss = append(ss, started{tok, pid})
	}
	return ss
}

// announce is a command that says its token and pid, then sleeps (the same
// pid), until stopped.
const announce = `echo "token $ZKR_FENCING_TOKEN pid $$"; exec sleep 300`

// TestElectRequeue runs zkr elect --requeue through a proxy, partitions it
// until the server expires its session: zkr stops the leader's command,
// campaigns again on a new session once the partition heals and starts a
// new command with a larger fencing token. SIGTERM then stops the command,
// resigns and exits 0, leaving nothing behind.
func TestElectRequeue(t *testing.T) {
	proxy := zktest.NewProxyT(t, servers(t))
	conn := admin(t)
	path := testPath(t, "election")
	p := start(t, nil, "elect", path, "--id", "a", "--requeue", "--servers", proxy.Addr(),
		"--session-timeout", "3s", "--connect-timeout", "2s", "--grace", "1s", "--", "sh", "-c", announce)
	p.waitOutput(10*time.Second, "the leader's command did not start", func(out string) bool { return len(starts(out)) == 1 })
	first := starts(p.stdout.String())[0]
	if first.token <= 0 || !alive(first.pid) {
		t.Fatalf("first command: %+v, alive %v", first, alive(first.pid))
	}
	owner := func() int64 {
		kids := children(t, conn, path)
		if len(kids) != 1 {
			return 0
		}
		_, st, err := conn.Get(context.Background(), path+"/"+kids[0])
		if err != nil {
			return 0
		}
		return st.EphemeralOwner
	}
	oldSession := owner()
	if oldSession == 0 {
		t.Fatalf("the election does not have one node: %v", children(t, conn, path))
	}

	// A partition: zkr, strict, counts the leadership lost after 1.5 s
	// and stops the command; the server expires the session after 3 s.
	proxy.Blackhole()
	eventually(t, 10*time.Second, "the first command still runs after the loss", func() bool { return !alive(first.pid) })
	eventually(t, 15*time.Second, "the server did not expire zkr's session", func() bool { return len(children(t, conn, path)) == 0 })
	if p.exited() {
		t.Fatalf("zkr exited %d on the loss; stderr:\n%s", p.code, p.stderr.String())
	}
	proxy.Pass()

	p.waitOutput(20*time.Second, "no new command after the partition healed", func(out string) bool { return len(starts(out)) == 2 })
	second := starts(p.stdout.String())[1]
	if second.token <= first.token || !alive(second.pid) {
		t.Errorf("second command %+v (alive %v) after the first %+v: want a larger token", second, alive(second.pid), first)
	}
	if s := owner(); s == 0 || s == oldSession {
		t.Errorf("the new leader's node is owned by 0x%x, want a new session (the old was 0x%x): %v", s, oldSession, children(t, conn, path))
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "lost leadership of "+path) || !strings.Contains(msg, "stopped the command") {
		t.Errorf("stderr does not tell the loss and the stop:\n%s", msg)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(10 * time.Second); code != 0 {
		t.Errorf("zkr elect --requeue exited %d on SIGTERM, want 0; stderr:\n%s", code, p.stderr.String())
	}
	if alive(second.pid) {
		t.Errorf("the command (pid %d) survived zkr", second.pid)
	}
	if kids := children(t, conn, path); len(kids) != 0 {
		t.Errorf("election nodes left after zkr exited: %v", kids)
	}
	if n := len(starts(p.stdout.String())); n != 2 {
		t.Errorf("%d commands ran, want 2:\n%s", n, p.stdout.String())
	}
}

// TestRequeueRestart checks --restart: on-failure runs the command again
// (with a larger token) after a failure and exits 0 after a success; never
// exits with the command's status; a command that cannot be run is not
// retried; bad combinations are refused.
func TestRequeueRestart(t *testing.T) {
	servers(t)
	conn := admin(t)
	dir := t.TempDir()
	path := testPath(t, "lock")
	script := `echo "token $ZKR_FENCING_TOKEN pid $$"; [ -e "$D/once" ] && exit 0; touch "$D/once"; exit 3`
	p := start(t, []string{"D=" + dir}, "lock", path, "--requeue", "--", "sh", "-c", script)
	if code := p.wait(20 * time.Second); code != 0 {
		t.Fatalf("lock --requeue: exit %d after a failure then a success, want 0; stderr:\n%s", code, p.stderr.String())
	}
	ss := starts(p.stdout.String())
	if len(ss) != 2 || ss[1].token <= ss[0].token {
		t.Errorf("on-failure: commands %+v, want two, the second with a larger token", ss)
	}
	if !strings.Contains(p.stderr.String(), "the command exited (exit status 3); waiting for the lock on "+path+" again") {
		t.Errorf("stderr does not tell the restart:\n%s", p.stderr.String())
	}
	if kids := children(t, conn, path); len(kids) != 0 {
		t.Errorf("lock nodes left: %v", kids)
	}

	r := zkr(t, "lock", path, "--requeue", "--restart", "never", "--", "true")
	if r.code != 0 {
		t.Errorf("--restart never, command exits 0: zkr exit %d; stderr %q", r.code, r.stderr)
	}
	r = zkr(t, "elect", path+"-e", "--id", "x", "--requeue", "--restart", "never", "--", "sh", "-c", "exit 4")
	if r.code != 4 {
		t.Errorf("--restart never, command exits 4: zkr exit %d; stderr %q", r.code, r.stderr)
	}
	r = zkr(t, "lock", path, "--requeue", "--restart", "always", "--", "/nonexistent/cmd")
	if r.code != exitNotFound {
		t.Errorf("--requeue with a command not found: exit %d, want %d; stderr %q", r.code, exitNotFound, r.stderr)
	}
	for _, bad := range [][]string{
		{"lock", path, "--restart", "always", "--", "true"},
		{"lock", path, "--requeue", "--restart", "sometimes", "--", "true"},
		{"lock", path, "--requeue", "--try", "--", "true"},
		{"lock", path, "--requeue", "--shared", "--", "true"},
		{"elect", path, "--id", "x", "--requeue", "--timeout", "1s", "--", "true"},
	} {
		r := zkr(t, bad...)
		if r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
		oneLineError(t, r)
	}
}

// TestJoinRequeue deletes a member's node under zkr join --requeue: zkr
// joins again rather than exiting, and leaves on SIGTERM with status 0.
func TestJoinRequeue(t *testing.T) {
	servers(t)
	conn := admin(t)
	path := testPath(t, "group")
	p := start(t, nil, "join", path, "--id", "w1", "--data", "d", "--requeue")
	eventually(t, 10*time.Second, "w1 did not join", func() bool { return len(children(t, conn, path)) == 1 })
	_, st, err := conn.Get(context.Background(), path+"/w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete(context.Background(), path+"/w1", -1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "w1 did not join again", func() bool {
		_, st2, err := conn.Get(context.Background(), path+"/w1")
		return err == nil && st2.Czxid != st.Czxid
	})
	if msg := p.stderr.String(); !strings.Contains(msg, fmt.Sprintf("lost membership %q of %s", "w1", path)) {
		t.Errorf("stderr does not tell the loss:\n%s", msg)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(10 * time.Second); code != 0 {
		t.Errorf("join --requeue exited %d on SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
	if kids := children(t, conn, path); len(kids) != 0 {
		t.Errorf("members left: %v", kids)
	}
}
