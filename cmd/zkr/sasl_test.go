package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestSASL locks under a node whose sasl ACL lets only the SASL user in,
// with the credentials by flag and by environment; a wrong password is a
// refusal (exit status 1) that names the flags, and so is the ACL without
// credentials.
func TestSASL(t *testing.T) {
	t.Parallel()
	c := zktest.StartT(t, zktest.Options{SASLUsers: map[string]string{"zkr": "s3cret"}})
	addr := c.Addr(0)
	path := testPath(t, "lock")
	owner := client(t, []string{addr}, zkclient.WithSASL(zkclient.DigestMD5("zkr", "s3cret")))
	mkdirs(t, owner, path, zkclient.SASLACL(zkclient.PermAll, "zkr"))

	for _, tt := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flags", nil, []string{"--sasl-user", "zkr", "--sasl-password", "s3cret"}},
		{"environment", []string{"ZKR_SASL_USER=zkr", "ZKR_SASL_PASSWORD=s3cret"}, nil},
		{"flags over environment", []string{"ZKR_SASL_USER=nobody", "ZKR_SASL_PASSWORD=wrong"}, []string{"--sasl-user", "zkr", "--sasl-password", "s3cret"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, append(tt.env, "ZKR_SERVERS="+addr), append(tt.args, "lock", path, "--", "sh", "-c", `test "$ZKR_FENCING_TOKEN" -gt 0`)...)
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
			}
			if tt.name != "flags" {
				return
			}
			p = start(t, append(tt.env, "ZKR_SERVERS="+addr), append(tt.args, "inspect", path)...)
			if code := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.stdout.String(), "no contenders") {
				t.Errorf("inspect: exit %d, %q; stderr %q", code, p.stdout.String(), p.stderr.String())
			}
		})
	}

	for _, tt := range []struct {
		name, args, want string
	}{
		{"wrong password", "--sasl-user zkr --sasl-password wrong", "refused the credentials (see --auth, --sasl-user, --kerberos-principal, --tls-cert)"},
		{"no credentials", "", "not authenticated (the node's ACL refuses this session's credentials; see --auth, --sasl-user, --kerberos-principal, --tls-cert)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := zkr(t, append(strings.Fields(tt.args), "--servers", addr, "lock", path, "--", "true")...)
			t.Logf("%s", r.stderr)
			if r.code != exitFailure {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitFailure, r.stderr)
			}
			oneLineError(t, r)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr does not say %q: %q", tt.want, r.stderr)
			}
		})
	}
	if kids, _, err := owner.Children(context.Background(), path); err != nil || len(kids) != 0 {
		t.Errorf("children of %s: %v %v, want none left", path, kids, err)
	}
}

// zkr server --sasl-user --sasl-password --require-sasl: zkr lock logs in
// as that user; a session without SASL is refused.
func TestServerSASL(t *testing.T) {
	t.Parallel()
	srv, addrs := startServer(t, 1, "--addr", "127.0.0.1:0", "--tick", "100ms", "--sasl-user", "bob", "--sasl-password", "pw", "--require-sasl")
	addr := addrs[0]
	if r := zkr(t, "--servers", addr, "--sasl-user", "bob", "--sasl-password", "pw", "lock", "/sasl/lock", "--", "true"); r.code != 0 {
		t.Fatalf("zkr lock with SASL: exit %d: %s", r.code, r.stderr)
	}
	r := zkr(t, "--servers", addr, "lock", "/sasl/lock", "--", "true")
	t.Logf("%s", r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "SASL authentication required") {
		t.Errorf("zkr lock without SASL: exit %d: %s", r.code, r.stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(10 * time.Second); code != 0 {
		t.Errorf("zkr server after SIGTERM: exit %d; stderr:\n%s", code, srv.stderr.String())
	}
	if !strings.Contains(srv.stderr.String(), "SASL user bob, required") {
		t.Errorf("zkr server does not say it serves SASL: %s", srv.stderr.String())
	}
}
