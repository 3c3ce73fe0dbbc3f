package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaders reads the pid files that leaders' commands wrote: id -> pid.
func leaders(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "pid-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			continue // being written
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimPrefix(filepath.Base(f), "pid-")] = pid
	}
	return out
}

func TestElectFailover(t *testing.T) {
	servers(t)
	dir := t.TempDir()
	path := testPath(t, "election")
	observer := start(t, nil, "elect", path, "--observe")

	// The command records its pid, then becomes a long sleep (same pid).
	script := `echo $$ > "$D/pid-$ZKR_ID"; exec sleep 60`
	procs := map[string]*proc{}
	for _, id := range []string{"a", "b", "c"} {
		procs[id] = start(t, []string{"D=" + dir}, "elect", path, "--id", id, "--session-timeout", "4s", "--", "sh", "-c", script)
	}
	var first string
	eventually(t, 10*time.Second, "no leader ran its command", func() bool {
		for id := range leaders(t, dir) {
			first = id
			return true
		}
		return false
	})
	conn := admin(t)
	eventually(t, 10*time.Second, "the three candidates are not all in the election", func() bool {
		return len(children(t, conn, path)) == 3
	})
	// A window for a second command to start, if one wrongly would: a
	// lower bound on how long only one runs, so not scaled.
	time.Sleep(time.Second)
	ls := leaders(t, dir)
	if len(ls) != 1 {
		t.Fatalf("%d commands ran at once, want 1: %v", len(ls), ls)
	}
	oldPid := ls[first]
	if !alive(oldPid) {
		t.Fatalf("the leader's command (pid %d) is not running", oldPid)
	}

	// The observer must have seen the first leader before it goes, or it
	// may first read the election after the failover.
	observer.waitOutput(10*time.Second, "the observer did not report the first leader", func(out string) bool {
		return strings.Contains(out, "leader "+first+"\n")
	})

	// Kill the leader's zkr outright: its command dies with it, and the
	// server expires its session after 4s.
	procs[first].cmd.Process.Signal(syscall.SIGKILL)
	procs[first].wait(5 * time.Second)
	eventually(t, 5*time.Second, "the dead leader's command still runs", func() bool { return !alive(oldPid) })
	var second string
	eventually(t, 15*time.Second, "no new leader after the leader was killed", func() bool {
		for id := range leaders(t, dir) {
			if id != first {
				second = id
				return true
			}
		}
		return false
	})
	// Again a window, not scaled, for a third command to start wrongly.
	time.Sleep(500 * time.Millisecond)
	if ls := leaders(t, dir); len(ls) != 2 {
		t.Fatalf("after one failover, %d commands have run, want 2: %v", len(ls), ls)
	}
	for id, p := range procs {
		if id != first && p.exited() {
			t.Errorf("candidate %s exited: %d; stderr:\n%s", id, p.code, p.stderr.String())
		}
	}

	// The observer saw both leaders. SIGTERM ends it normally.
	observer.waitOutput(5*time.Second, "the observer did not report the new leader", func(out string) bool {
		return strings.Contains(out, "leader "+second+"\n")
	})
	observer.cmd.Process.Signal(syscall.SIGTERM)
	if code := observer.wait(10 * time.Second); code != 0 {
		t.Errorf("observer exited %d; stderr:\n%s", code, observer.stderr.String())
	}

	// The new leader stops when told to, and resigns.
	procs[second].cmd.Process.Signal(syscall.SIGTERM)
	if code := procs[second].wait(10 * time.Second); code != exitSignal+int(syscall.SIGTERM) {
		t.Errorf("leader exited %d, want its command's %d; stderr:\n%s", code, exitSignal+int(syscall.SIGTERM), procs[second].stderr.String())
	}
}

func TestElectInput(t *testing.T) {
	servers(t)
	path := testPath(t, "election")
	r := zkr(t, "elect", path, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--id is required") {
		t.Errorf("elect without --id: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLineError(t, r)
	r = zkr(t, "elect", path, "--id", "x", "--", "sh", "-c", "exit 4")
	if r.code != 4 {
		t.Errorf("elect's command status 4: zkr exit %d; stderr %q", r.code, r.stderr)
	}
}
