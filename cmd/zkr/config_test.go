package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestConfigCommands runs config and reconfig on one 2-member ensemble
// with dynamic reconfiguration (and on the shared standalone server):
// config shows the members, their roles, addresses and the version, and
// --watch follows changes; reconfig adds a member and removes one (the
// one zkr is connected to, whose connection may drop before the answer),
// from the version read or the one given; bad input, a stale version,
// missing rights and a server without dynamic configuration fail with
// an error that names what was wrong.
func TestConfigCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 2-member ensemble")
	}
	servers(t)
	t.Parallel()

	t.Run("usage", func(t *testing.T) {
		for _, tt := range []struct {
			args string
			want string
		}{
			{"reconfig", "nothing to change: give --add, --remove or --members"},
			{"reconfig --remove 2 --members server.1=127.0.0.1:1:2;3", "--members replaces the whole configuration"},
			{"reconfig --remove two", `--remove "two": a server id is a number`},
			{"reconfig --remove 2 --from-config xyz", `--from-config "xyz": a configuration version is a hex number`},
			{"config extra", `unexpected arguments ["extra"]`},
		} {
			r := zkr(t, strings.Fields(tt.args)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("zkr %s: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
			}
			oneLineError(t, r)
		}
	})

	t.Run("standalone", func(t *testing.T) {
		r := zkr(t, "config", "--json")
		var v configView
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Version != "0" || len(v.Members) != 0 {
			t.Fatalf("config on a standalone server: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = zkr(t, "reconfig", "--remove", "1")
		if r.code != exitFailure || !strings.Contains(r.stderr, "has no dynamic configuration") {
			t.Fatalf("reconfig on a standalone server: exit %d, stderr %q", r.code, r.stderr)
		}
		oneLineError(t, r)
	})

	cluster := zktest.StartT(t, zktest.Options{Servers: 2, Reconfig: true})
	all := strings.Join(cluster.Addrs(), ",")
	super := "--auth=" + zktest.SuperUser + ":" + zktest.SuperPassword
	config := func(args ...string) configView {
		t.Helper()
		r := zkr(t, append([]string{"--servers", all}, append(args, "--json")...)...)
		var v configView
		if r.code != 0 {
			t.Fatalf("zkr %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("zkr %q: %v in %q", args, err, r.stdout)
		}
		return v
	}
	clients := func(v configView) map[int64]string {
		m := map[int64]string{}
		for _, mb := range v.Members {
			m[mb.ID] = mb.Client
		}
		return m
	}

	v := config("config")
	if len(v.Members) != 2 {
		t.Fatalf("config: %+v, want 2 members", v)
	}
	for _, m := range v.Members {
		if m.Role != "participant" || m.Client != cluster.Addr(int(m.ID-1)) || m.Quorum == "" {
			t.Errorf("member %+v, want a participant at %s", m, cluster.Addr(int(m.ID-1)))
		}
	}
	r := zkr(t, "--servers", cluster.Addr(1), "config")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "version "+v.Version+"\nID  ") ||
		!strings.Contains(r.stdout, "\n2   participant  "+cluster.Addr(1)+" *  ") {
		t.Errorf("config table: exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
	}

	// A watcher sees every change.
	watcher := start(t, nil, "--servers", all, "config", "--watch", "--json")
	watched := func(n int) configView {
		t.Helper()
		var lines []string
		watcher.waitOutput(20*time.Second, fmt.Sprintf("config --watch prints %d configurations", n), func(out string) bool {
			lines = strings.Fields(out) // one JSON object a line, without spaces
			return len(lines) >= n
		})
		var v configView
		if err := json.Unmarshal([]byte(lines[n-1]), &v); err != nil {
			t.Fatalf("config --watch: %v in %q", err, lines[n-1])
		}
		return v
	}
	if w := watched(1); w.Version != v.Version {
		t.Fatalf("config --watch first printed version %s, want %s", w.Version, v.Version)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{super, "reconfig", "--remove", "2"}, exitFailure, "bad arguments (the servers refused the new configuration: it must keep at least 2 participants"},
			{[]string{"reconfig", "--add", "server.9=127.0.0.1:1:2;3"}, exitFailure, "not authenticated (only the super user, or a session the ACL of /zookeeper/config lets write, may reconfigure; see --auth)"},
			{[]string{super, "reconfig", "--remove", "2", "--from-config", "1" + v.Version}, exitFailure, "the configuration is at version " + v.Version + ", not --from-config 1" + v.Version},
			{[]string{super, "reconfig", "--add", "server.9=127.0.0.1:1:2"}, exitUsage, `server line "server.9=127.0.0.1:1:2" has no client port`},
			{[]string{super, "reconfig", "--add", "server.x=127.0.0.1:1:2;3"}, exitUsage, `server line "server.x=127.0.0.1:1:2;3": server id`},
		} {
			r := zkr(t, append([]string{"--servers", all}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("zkr %q: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
			}
			oneLineError(t, r)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
	defer cancel()
	i, err := cluster.AddMember(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Kill(i) })
	id := strconv.Itoa(i + 1)

	// The answer to the add is lost with the connection, the request
	// having been dropped on the way: zkr finds out that the change did
	// not apply.
	proxy := zktest.NewProxyT(t, cluster.Addr(0))
	proxy.CutOnRequest(jute.OpReconfig, false)
	r = zkr(t, "--servers", proxy.Addr(), super, "reconfig", "--add", cluster.ServerSpec(i))
	if r.code != exitFailure || !strings.Contains(r.stderr, "the connection was lost before the answer, and the configuration is still version "+v.Version+": the change did not apply; run it again") {
		t.Fatalf("reconfig whose request was dropped: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLineError(t, r)

	// Add the new member from the version config printed.
	added := config(super, "reconfig", "--add", cluster.ServerSpec(i), "--from-config", v.Version)
	if got := clients(added); len(got) != 3 || got[int64(i+1)] != cluster.Addr(i) || added.Version == v.Version {
		t.Fatalf("after adding member %s: %+v (was version %s)", id, added, v.Version)
	}
	if w := watched(2); w.Version != added.Version || len(w.Members) != 3 {
		t.Fatalf("config --watch printed %+v, want version %s with 3 members", w, added.Version)
	}

	// Remove it while connected to it, the answer lost with the
	// connection after the request reached the server: zkr reconnects,
	// to another member, and finds out that the change applied.
	proxy = zktest.NewProxyT(t, cluster.Addr(i))
	proxy.CutOnRequest(jute.OpReconfig, true)
	r = zkr(t, "-v", "--servers", proxy.Addr(), super, "reconfig", "--remove", id, "--json")
	var removed configView
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &removed) != nil {
		t.Fatalf("removing the member zkr is on: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "connection lost before the answer") {
		t.Fatalf("the answer was not lost; stderr:\n%s", r.stderr)
	}
	if got := clients(removed); len(got) != 2 || got[int64(i+1)] != "" {
		t.Fatalf("after removing member %s: %+v", id, removed)
	}
	if now := config("config"); now.Version != removed.Version {
		t.Fatalf("config after the removal: version %s, reconfig said %s", now.Version, removed.Version)
	}
	if w := watched(3); w.Version != removed.Version {
		t.Fatalf("config --watch printed version %s, want %s", w.Version, removed.Version)
	}
}
