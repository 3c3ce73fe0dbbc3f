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

	both := "a\t" + host + ":8080\t{\"zone\":\"z1\"}\tenabled\nb\th:81\t\"plain text\"\tenabled\n"
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
	only := "a\t" + host + ":8080\t{\"zone\":\"z1\"}\tenabled\n"
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

// TestServicesPick registers three instances of a service, one disabled,
// and asks zkr services --pick what a Provider picks with each strategy:
// never the disabled one, which the listing marks and the picks explain.
func TestServicesPick(t *testing.T) {
	servers(t)
	base := testPath(t, "services")
	var procs []*proc
	for _, args := range [][]string{{"--id", "a", "--port", "1"}, {"--id", "b", "--port", "2", "--disabled"}, {"--id", "c", "--port", "3"}} {
		procs = append(procs, start(t, nil, append([]string{"register", base, "api", "--address", "h"}, args...)...))
	}
	list := "a\th:1\t\tenabled\nb\th:2\t\tdisabled\nc\th:3\t\tenabled\n"
	eventually(t, 10*time.Second, "services does not list a, b and c", func() bool {
		return zkr(t, "services", base, "api").stdout == list
	})

	r := zkr(t, "services", base, "api", "--pick", "4", "--strategy", "round-robin")
	want := list + "round-robin picks among 2 usable of 3 instances; not usable: b disabled\na\th:1\nc\th:3\na\th:1\nc\th:3\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("--pick 4 --strategy round-robin: exit %d, stdout\n%s\nwant\n%s\nstderr %q", r.code, r.stdout, want, r.stderr)
	}
	for _, st := range []string{"random", "sticky"} {
		r := zkr(t, "services", base, "api", "--pick", "6", "--strategy", st, "--json")
		var out struct {
			Strategy string
			Usable   []string
			Picks    []string
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
			t.Fatalf("--strategy %s --json: exit %d, %q (%v); stderr %q", st, r.code, r.stdout, err, r.stderr)
		}
		if out.Strategy != st || strings.Join(out.Usable, ",") != "a,c" || len(out.Picks) != 6 {
			t.Errorf("--strategy %s --json: %+v", st, out)
		}
		for _, id := range out.Picks {
			if id != "a" && id != "c" || st == "sticky" && id != out.Picks[0] {
				t.Errorf("--strategy %s picked %v", st, out.Picks)
				break
			}
		}
	}

	// With only the disabled instance left, nothing can be picked.
	for _, p := range []*proc{procs[0], procs[2]} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(10 * time.Second); code != 0 {
			t.Errorf("register exited %d on SIGTERM", code)
		}
	}
	r = zkr(t, "services", base, "api", "--pick", "1")
	if r.code != exitFailure || !strings.Contains(r.stdout, "random picks among 0 usable of 1 instances; not usable: b disabled") ||
		!strings.Contains(r.stderr, "no usable service instance") {
		t.Errorf("--pick with only a disabled instance: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	oneLineError(t, r)
	for _, bad := range [][]string{
		{"services", base, "--pick", "1"},
		{"services", base, "api", "--strategy", "random"},
		{"services", base, "api", "--pick", "1", "--strategy", "first"},
		{"services", base, "api", "--pick", "-1"},
		{"services", base, "api", "--pick", "1", "--watch"},
	} {
		if r := zkr(t, bad...); r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
	}
}
