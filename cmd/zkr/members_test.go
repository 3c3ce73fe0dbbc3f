package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestJoinAndMembers(t *testing.T) {
	servers(t)
	path := testPath(t, "group")
	a := start(t, nil, "join", path, "--id", "a", "--data", "host-a:80", "--", "sleep", "60")
	b := start(t, nil, "join", path, "--id", "b")
	watch := start(t, nil, "members", path, "--watch")

	eventually(t, 10*time.Second, "members does not list a and b", func() bool {
		return zkr(t, "members", path).stdout == "a\thost-a:80\nb\n"
	})
	// The watcher must have printed both members before b leaves, or it
	// may first read the group after b left and never show the change.
	watch.waitOutput(10*time.Second, "members --watch did not list a and b", func(out string) bool {
		return strings.HasSuffix(out, "2 members\na\thost-a:80\nb\n")
	})
	r := zkr(t, "join", path, "--id", "a", "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, `member id "a" is taken`) {
		t.Errorf("joining with a taken id: exit %d, stderr %q", r.code, r.stderr)
	}

	// b leaves on SIGTERM, with status 0.
	b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.wait(10 * time.Second); code != 0 {
		t.Errorf("join without a command exited %d on SIGTERM; stderr:\n%s", code, b.stderr.String())
	}
	eventually(t, 10*time.Second, "b is still a member", func() bool {
		return zkr(t, "members", path).stdout == "a\thost-a:80\n"
	})
	watch.waitOutput(10*time.Second, "members --watch did not follow b leaving", func(out string) bool {
		return strings.Contains(out, "2 members\na\thost-a:80\nb\n") && strings.HasSuffix(out, "1 members\na\thost-a:80\n")
	})

	r = zkr(t, "members", path, "--json")
	if strings.TrimSpace(r.stdout) != `[{"id":"a","data":"host-a:80"}]` {
		t.Errorf("members --json: %q", r.stdout)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.wait(10 * time.Second); code != exitSignal+int(syscall.SIGTERM) {
		t.Errorf("join's command killed by SIGTERM: zkr exit %d; stderr:\n%s", code, a.stderr.String())
	}
	if r := zkr(t, "members", path); r.code != 0 || r.stdout != "" {
		t.Errorf("after everyone left: exit %d, members %q", r.code, r.stdout)
	}
}
