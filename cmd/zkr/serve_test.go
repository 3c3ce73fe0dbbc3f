package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zkr server runs zkserver: other zkr commands (and any client) use it; a
// SIGTERM stops it cleanly.
func TestServer(t *testing.T) {
	srv := start(t, nil, "server", "--addr", "127.0.0.1:0", "--tick", "100ms")
	var addr string
	eventually(t, 10*time.Second, "zkr server printed no address", func() bool {
		addr = strings.TrimSpace(srv.stdout.String())
		return addr != ""
	})
	env := []string{"ZKR_SERVERS=" + addr}
	if r := start(t, env, "lock", "--id", "on-zkserver", "/srv/lock", "--", "sh", "-c", `test -n "$ZKR_FENCING_TOKEN"`); r.wait(30*time.Second) != 0 {
		t.Fatalf("zkr lock on zkr server: stderr:\n%s", r.stderr.String())
	}
	if r := zkr(t, "inspect", "--servers", addr, "/srv/lock"); r.code != 0 {
		t.Errorf("zkr inspect on zkr server: exit %d: %s", r.code, r.stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Errorf("zkr server after SIGTERM: exit %d; stderr:\n%s", code, srv.stderr.String())
	}
	if r := zkr(t, "server", "--tick", "0s"); r.code != exitUsage {
		t.Errorf("--tick 0s: exit %d, want %d", r.code, exitUsage)
	}
}

// zkr server --data-dir keeps the tree across a restart of the process.
func TestServerDataDir(t *testing.T) {
	dir := t.TempDir()
	run := func() (*proc, string) {
		srv := start(t, nil, "server", "--addr", "127.0.0.1:0", "--tick", "100ms", "--data-dir", dir)
		var addr string
		eventually(t, 10*time.Second, "zkr server printed no address", func() bool {
			addr = strings.TrimSpace(srv.stdout.String())
			return addr != ""
		})
		return srv, addr
	}
	exists := func(addr string) bool {
		r := zkr(t, "inspect", "--servers", addr, "--json", "/kept/lock")
		if r.code != 0 {
			t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
		}
		var in inspection
		if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
		}
		return in.Exists
	}
	srv, addr := run()
	if r := zkr(t, "lock", "--servers", addr, "/kept/lock", "--", "true"); r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.stderr)
	}
	if !exists(addr) {
		t.Fatal("the lock's parent does not exist after locking")
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Fatalf("zkr server: exit %d", code)
	}
	srv, addr = run()
	if !exists(addr) {
		t.Error("the lock's parent did not survive a restart with --data-dir")
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.wait(10 * time.Second)
}
