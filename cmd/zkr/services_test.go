package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRegisterAndServices(t *testing.T) {
	servers(t)
	conn := admin(t)
	base := testPath(t, "services")
	host, _ := os.Hostname()
	a := start(t, nil, "register", base, "api", "--id", "a", "--port", "8080", "--payload", `{"zone":"z1"}`, "--", "sleep", "60")
	b := start(t, nil, "register", base, "api", "--id", "b", "--address", "h", "--port", "81", "--payload", "plain text")
	watch := start(t, nil, "services", base, "api", "--watch")

	both := "a\t" + host + ":8080\t{\"zone\":\"z1\"}\nb\th:81\t\"plain text\"\n"
	eventually(t, 10*time.Second, "services does not list a and b", func() bool {
		return zkr(t, "services", base, "api").stdout == both
	})
	// The watcher must have printed both instances before b goes, or it
	// may first read the service after b went and never show the change.
	watch.waitOutput(10*time.Second, "services --watch did not list a and b", func(out string) bool {
		return strings.HasSuffix(out, "2 instances\n"+both)
	})
	if r := zkr(t, "services", base); r.code != 0 || r.stdout != "api\n" {
		t.Errorf("services: exit %d, %q", r.code, r.stdout)
	}
	data, st, err := conn.Get(context.Background(), base+"/api/a")
	if err != nil {
		t.Fatal(err)
	}
	var inst map[string]any
	if err := json.Unmarshal(data, &inst); err != nil || inst["name"] != "api" || inst["id"] != "a" || inst["port"] != 8080.0 ||
		inst["serviceType"] != "DYNAMIC" || st.EphemeralOwner == 0 {
		t.Errorf("instance node %s (owner 0x%x, %v)", data, st.EphemeralOwner, err)
	}
	r := zkr(t, "register", base, "api", "--id", "a", "--", "true")
	if r.code != exitHeld || !strings.Contains(r.stderr, `instance id "a" of api is held by another session`) {
		t.Errorf("registering a held id: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{{"register", base}, {"register", base, "api", "x"}, {"register", base, "a/b"}, {"register", base, "api", "--port", "70000"}, {"services", base, "--watch"}} {
		if r := zkr(t, bad...); r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
	}

	// b unregisters on SIGTERM, with status 0.
	b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.wait(10 * time.Second); code != 0 {
		t.Errorf("register without a command exited %d on SIGTERM; stderr:\n%s", code, b.stderr.String())
	}
	only := "a\t" + host + ":8080\t{\"zone\":\"z1\"}\n"
	eventually(t, 10*time.Second, "b is still registered", func() bool {
		return zkr(t, "services", base, "api").stdout == only
	})
	watch.waitOutput(10*time.Second, "services --watch did not follow b going", func(out string) bool {
		return strings.Contains(out, "2 instances\n"+both) && strings.HasSuffix(out, "1 instances\n"+only)
	})
	r = zkr(t, "services", base, "api", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0]["id"] != "a" {
		t.Errorf("services --json: %q (%v)", r.stdout, err)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.wait(10 * time.Second); code != exitSignal+int(syscall.SIGTERM) {
		t.Errorf("register's command killed by SIGTERM: zkr exit %d; stderr:\n%s", code, a.stderr.String())
	}
	if kids := children(t, conn, base+"/api"); len(kids) != 0 {
		t.Errorf("instances left after both exited: %v", kids)
	}
}
