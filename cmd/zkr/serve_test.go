package main

import (
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
