package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// untilReleased is a command that holds until the file $D/release exists.
const untilReleased = `touch "$D/started"; while [ ! -e "$D/release" ]; do sleep 0.05; done`

// TestTLS runs zkr lock and zkr inspect on a secure client port, with the
// files given by flag and by environment, and checks that a plain or
// certificate-less client cannot connect there.
func TestTLS(t *testing.T) {
	t.Parallel() // with the other tests of this file: the JVM starts meanwhile
	c := zktest.StartT(t, zktest.Options{TLS: true})
	files := c.TLSFiles()
	secure := c.SecureAddr(0)
	conn := client(t, []string{secure}, zkclient.WithTLS(c.ClientTLS()))
	path := testPath(t, "lock")

	t.Run("lock and inspect", func(t *testing.T) {
		dir := t.TempDir()
		// The flags win over the (broken) variables.
		env := []string{"D=" + dir, "ZKR_TLS_CA=/nonexistent/ca.pem", "ZKR_TLS_CERT=/nonexistent/cert.pem", "ZKR_TLS_KEY=/nonexistent/key.pem"}
		holder := start(t, env, "--servers", secure, "--tls-ca", files.CA, "--tls-cert", files.Cert, "--tls-key", files.Key,
			"lock", "--id", "tls-holder", path, "--", "sh", "-c", untilReleased)
		eventually(t, 15*time.Second, "the command did not start under the lock", func() bool {
			return fileExists(filepath.Join(dir, "started")) || holder.exited()
		})
		if holder.exited() {
			t.Fatalf("zkr lock over TLS: exit %d; stderr:\n%s", holder.code, holder.stderr.String())
		}
		if kids, _, err := conn.Children(context.Background(), path); err != nil || len(kids) != 1 {
			t.Fatalf("children of %s: %v %v, want the holder's node", path, kids, err)
		}

		// inspect with everything from the environment.
		p := start(t, []string{"ZKR_SERVERS=" + secure, "ZKR_TLS_CA=" + files.CA, "ZKR_TLS_CERT=" + files.Cert, "ZKR_TLS_KEY=" + files.Key}, "inspect", path)
		code := p.wait(time.Minute)
		out := p.stdout.String()
		t.Logf("inspect over TLS:\n%s", out)
		if code != 0 {
			t.Fatalf("inspect over TLS: exit %d; stderr %q", code, p.stderr.String())
		}
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(lines[0], path+": lock, 1 in queue") || len(lines) < 3 {
			t.Fatalf("unexpected report:\n%s", out)
		}
		if f := strings.Fields(lines[2]); f[1] != "holds" || f[4] != "tls-holder" {
			t.Errorf("the holder should be zkr lock --id tls-holder: %q", lines[2])
		}
		if strings.Contains(out, "ORPHANED") || strings.Contains(out, "could not look for orphaned") {
			t.Errorf("the holder's session is connected (cons over TLS):\n%s", out)
		}

		os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
		if code := holder.wait(15 * time.Second); code != 0 {
			t.Fatalf("zkr lock over TLS: exit %d; stderr:\n%s", code, holder.stderr.String())
		}
		if kids, _, err := conn.Children(context.Background(), path); err != nil || len(kids) != 0 {
			t.Errorf("children of %s after the release: %v %v", path, kids, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
		}{
			{"no TLS", []string{"--servers", secure}},
			{"no client certificate", []string{"--servers", secure, "--tls-ca", files.CA}},
			{"TLS to the plain port", []string{"--servers", c.Addr(0), "--tls-ca", files.CA, "--tls-cert", files.Cert, "--tls-key", files.Key}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t0 := time.Now()
				r := zkr(t, append(tt.args, "--connect-timeout", "1s", "lock", path, "--", "true")...)
				elapsed := time.Since(t0)
				t.Logf("after %v: %s", elapsed.Round(time.Millisecond), r.stderr)
				if r.code != exitConnect {
					t.Fatalf("exit %d, want %d; stderr %q", r.code, exitConnect, r.stderr)
				}
				oneLineError(t, r)
				if !strings.Contains(r.stderr, "cannot connect to ZooKeeper at 127.0.0.1:") || !strings.Contains(r.stderr, "within 1s") {
					t.Errorf("stderr does not say zkr cannot connect within 1s: %q", r.stderr)
				}
				if elapsed > 10*time.Second {
					t.Errorf("zkr took %v to give up, with --connect-timeout 1s", elapsed)
				}
			})
		}
	})
}

// TestAuth locks under a node whose digest ACL lets only one user in.
func TestAuth(t *testing.T) {
	t.Parallel()
	addr := servers(t)
	path := testPath(t, "lock")
	owner := client(t, []string{addr}, zkclient.WithDigestAuth("zkr", "s3cret"))
	mkdirs(t, owner, path, zkclient.DigestACL(zkclient.PermAll, "zkr", "s3cret"))

	for _, tt := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"--auth", "zkr:s3cret"}},
		{"environment", []string{"ZKR_AUTH=zkr:s3cret"}, nil},
		{"flag over environment", []string{"ZKR_AUTH=zkr:wrong"}, []string{"--auth", "zkr:s3cret"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, append(tt.args, "lock", path, "--", "sh", "-c", `test "$ZKR_FENCING_TOKEN" -gt 0`)...)
			if code := p.wait(30 * time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
			}
			p = start(t, tt.env, append(tt.args, "inspect", path)...)
			if code := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.stdout.String(), "no contenders") {
				t.Errorf("inspect: exit %d, %q; stderr %q", code, p.stdout.String(), p.stderr.String())
			}
		})
	}

	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no credentials", []string{"lock", path, "--", "true"}},
		{"wrong password", []string{"--auth", "zkr:wrong", "lock", path, "--", "true"}},
		{"inspect without credentials", []string{"inspect", path}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := zkr(t, tt.args...)
			t.Logf("%s", r.stderr)
			if r.code != exitFailure {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitFailure, r.stderr)
			}
			oneLineError(t, r)
			if !strings.Contains(r.stderr, "not authenticated") || !strings.Contains(r.stderr, "see --auth") {
				t.Errorf("stderr does not say the ACL refused the session: %q", r.stderr)
			}
		})
	}
	kids, _, err := owner.Children(context.Background(), path)
	if err != nil || len(kids) != 0 {
		t.Errorf("children of %s: %v %v, want none left", path, kids, err)
	}
}

// TestChroot runs every command under a chroot given in --servers: their
// paths are relative to it, and their nodes land under it.
func TestChroot(t *testing.T) {
	t.Parallel()
	addr := servers(t)
	root := testPath(t, "app")
	conn := client(t, []string{addr})
	mkdirs(t, conn, root, zkclient.WorldACL(zkclient.PermAll))
	chrooted := addr + root
	kids := func(p string) []string {
		k, _, err := conn.Children(context.Background(), root+p)
		if err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			t.Fatal(err)
		}
		return k
	}

	t.Run("lock and inspect", func(t *testing.T) {
		dir := t.TempDir()
		holder := start(t, []string{"D=" + dir}, "lock", "--servers", chrooted, "--id", "in-chroot", "/l", "--",
			"sh", "-c", `[ "$ZKR_PATH" = /l ] || exit 9; `+untilReleased)
		eventually(t, 10*time.Second, "zkr lock did not take the lock", func() bool {
			return fileExists(filepath.Join(dir, "started")) || holder.exited()
		})
		if holder.exited() {
			t.Fatalf("zkr lock under a chroot: exit %d; stderr:\n%s", holder.code, holder.stderr.String())
		}
		if k := kids("/l"); len(k) != 1 {
			t.Fatalf("children of %s/l: %v, want the holder's node", root, k)
		}
		r := zkr(t, "inspect", "--servers", chrooted, "/l")
		t.Logf("inspect under the chroot:\n%s", r.stdout)
		lines := strings.Split(r.stdout, "\n")
		if r.code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[0], "/l: lock, 1 in queue") {
			t.Fatalf("inspect under the chroot: exit %d, stderr %q:\n%s", r.code, r.stderr, r.stdout)
		}
		if f := strings.Fields(lines[2]); f[1] != "holds" || f[4] != "in-chroot" || strings.Contains(lines[2], "ORPHANED") {
			t.Errorf("the holder should be zkr lock --id in-chroot, connected: %q", lines[2])
		}
		r = zkr(t, "inspect", "--servers", chrooted, "/l", "--json")
		var in inspection
		if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
		}
		if in.Path != "/l" || len(in.Contenders) != 1 || in.Contenders[0].ID != "in-chroot" || in.Contenders[0].Node != kids("/l")[0] {
			t.Errorf("inspect --json under the chroot: %+v", in)
		}
		// The same queue seen from the root.
		if r := zkr(t, "inspect", root+"/l"); !strings.HasPrefix(r.stdout, root+"/l: lock, 1 in queue") || !strings.Contains(r.stdout, "in-chroot") {
			t.Errorf("inspect %s/l without the chroot:\n%s", root, r.stdout)
		}
		os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
		if code := holder.wait(10 * time.Second); code != 0 {
			t.Fatalf("zkr lock under a chroot: exit %d; stderr:\n%s", code, holder.stderr.String())
		}
		if k := kids("/l"); len(k) != 0 {
			t.Errorf("nodes left behind in %s/l: %v", root, k)
		}
	})

	t.Run("elect", func(t *testing.T) {
		dir := t.TempDir()
		leader := start(t, []string{"D=" + dir, "ZKR_SERVERS=" + chrooted}, "elect", "/e", "--id", "leader-1", "--", "sh", "-c", untilReleased)
		eventually(t, 10*time.Second, "zkr elect did not lead", func() bool {
			return fileExists(filepath.Join(dir, "started")) || leader.exited()
		})
		if k := kids("/e"); len(k) != 1 {
			t.Fatalf("children of %s/e: %v, want the leader's node", root, k)
		}
		r := zkr(t, "inspect", "--servers", chrooted, "/e")
		if !strings.HasPrefix(r.stdout, "/e: election, 1 in queue") || !strings.Contains(r.stdout, "leader-1") {
			t.Errorf("inspect under the chroot: exit %d, stderr %q:\n%s", r.code, r.stderr, r.stdout)
		}
		os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
		if code := leader.wait(10 * time.Second); code != 0 {
			t.Fatalf("zkr elect under a chroot: exit %d; stderr:\n%s", code, leader.stderr.String())
		}
	})

	t.Run("join and members", func(t *testing.T) {
		member := start(t, nil, "join", "--servers", chrooted, "/g", "--id", "a", "--data", "host-a:80")
		eventually(t, 10*time.Second, "members under the chroot does not list a", func() bool {
			return zkr(t, "members", "--servers", chrooted, "/g").stdout == "a\thost-a:80\n"
		})
		if k := kids("/g"); len(k) != 1 || k[0] != "a" {
			t.Errorf("children of %s/g: %v, want [a]", root, k)
		}
		member.cmd.Process.Signal(syscall.SIGTERM)
		if code := member.wait(10 * time.Second); code != 0 {
			t.Errorf("join exited %d on SIGTERM; stderr:\n%s", code, member.stderr.String())
		}
	})

	t.Run("missing chroot", func(t *testing.T) {
		r := zkr(t, "lock", "--servers", addr+root+"/missing", "/l", "--", "true")
		if r.code != exitFailure || !strings.Contains(r.stderr, "the chroot "+root+"/missing of the server list does not exist") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		oneLineError(t, r)
	})
}
