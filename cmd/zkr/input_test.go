package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestBadInput(t *testing.T) {
	servers(t)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command after --", []string{"lock", "/x", "--"}, exitUsage, "no command after --"},
		{"no --", []string{"lock", "/x"}, exitUsage, "missing -- COMMAND"},
		{"command without --", []string{"lock", "/x", "true"}, exitUsage, "put -- between PATH and the command"},
		{"no path", []string{"lock", "--", "true"}, exitUsage, "missing PATH"},
		{"relative path", []string{"lock", "x/y", "--", "true"}, exitUsage, "invalid path"},
		{"reserved path", []string{"lock", "/zookeeper/x", "--", "true"}, exitUsage, "invalid path"},
		{"trailing slash", []string{"elect", "/x/", "--id", "a", "--", "true"}, exitUsage, "invalid path"},
		{"inspect bad path", []string{"inspect", "x"}, exitUsage, "invalid path"},
		{"members bad path", []string{"members", "/x//y"}, exitUsage, "invalid path"},
		{"bad member id", []string{"join", "/g", "--id", "a/b"}, exitUsage, "not one path segment"},
		{"bad duration", []string{"lock", "--timeout", "5x", "/x", "--", "true"}, exitUsage, `invalid argument "5x"`},
		{"negative duration", []string{"lock", "--timeout", "-1s", "/x", "--", "true"}, exitUsage, "must not be negative"},
		{"unknown flag", []string{"lock", "--bogus", "/x", "--", "true"}, exitUsage, "unknown flag: --bogus"},
		{"unknown command", []string{"lokc"}, exitUsage, `unknown command "lokc"`},
		{"elect without id", []string{"elect", "/x", "--", "true"}, exitUsage, "--id is required"},
		{"observe with command", []string{"elect", "/x", "--observe", "--", "true"}, exitUsage, "--observe runs no command"},
		{"two paths", []string{"inspect", "/a", "/b"}, exitUsage, "expected one PATH"},
		{"plot format", []string{"demo", "--plot", "herd.gif"}, exitUsage, "must end in .svg or .png"},
		{"bad sweep", []string{"demo", "--sweep", "10,x"}, exitUsage, `"x" is not a positive number`},
		{"bad recipe", []string{"bench", "--recipes", "zkrecipes,nope"}, exitUsage, `unknown workload "nope"`},
		{"no rounds", []string{"bench", "--rounds", "0"}, exitUsage, "--rounds 0: must be at least 1"},
		{"chain of one", []string{"bench", "--chain", "--clients", "1,10"}, exitUsage, "a --chain needs at least 2 clients"},
		{"chain requeue", []string{"bench", "--chain", "--recipes", "zkrecipes-requeue"}, exitUsage, "cannot run as a --chain"},
		{"bad servers", []string{"lock", "--servers", "a:1,,b:2", "/x", "--", "true"}, exitUsage, "empty address"},
		{"unreachable", []string{"lock", "--servers", "127.0.0.1:1", "--connect-timeout", "500ms", "/x", "--", "true"}, exitConnect, "cannot connect to ZooKeeper at 127.0.0.1:1 within 500ms"},
		{"unreachable inspect", []string{"inspect", "--servers", "127.0.0.1:1", "--connect-timeout", "500ms", "/x"}, exitConnect, "cannot connect to ZooKeeper"},
		{"unknown host", []string{"members", "--servers", "no-such-host.invalid:2181", "/x"}, exitConnect, "cannot connect to ZooKeeper"},
		{"chroot trailing slash", []string{"lock", "--servers", "127.0.0.1:2181/app/", "/x", "--", "true"}, exitUsage, `chroot "/app/": trailing slash`},
		{"chroot empty segment", []string{"inspect", "--servers", "127.0.0.1:2181/a//b", "/x"}, exitUsage, `chroot "/a//b": empty segment`},
		{"chroot without servers", []string{"members", "--servers", "/app", "/x"}, exitUsage, "empty address"},
		{"tls cert without key", []string{"lock", "--tls-cert", "client.pem", "/x", "--", "true"}, exitUsage, "--tls-cert given without --tls-key"},
		{"tls key without cert", []string{"inspect", "--tls-key", "client-key.pem", "/x"}, exitUsage, "--tls-key given without --tls-cert"},
		{"tls ca unreadable", []string{"lock", "--tls-ca", "/nonexistent/ca.pem", "/x", "--", "true"}, exitUsage, `--tls-ca "/nonexistent/ca.pem": cannot read: no such file or directory`},
		{"tls ca not PEM", []string{"elect", "--tls-ca", "main.go", "/x", "--id", "a", "--", "true"}, exitUsage, `--tls-ca "main.go": no PEM certificate in the file`},
		{"tls key unreadable", []string{"members", "--tls-cert", "main.go", "--tls-key", "/nonexistent/key.pem", "/x"}, exitUsage, `--tls-key "/nonexistent/key.pem": cannot read`},
		{"tls cert not PEM", []string{"join", "--tls-cert", "main.go", "--tls-key", "root.go", "/x", "--id", "a"}, exitUsage, `--tls-cert "main.go" with --tls-key "root.go": tls: failed to find any PEM data`},
		{"auth without colon", []string{"lock", "--auth", "zkr-s3cret", "/x", "--", "true"}, exitUsage, "--auth: expected user:password (digest scheme), found no colon"},
		{"auth without user", []string{"inspect", "--auth", ":s3cret", "/x"}, exitUsage, "--auth: expected user:password (digest scheme), the user is empty"},
		{"bench with auth", []string{"bench", "--servers", "127.0.0.1:1", "--auth", "zkr:s3cret"}, exitUsage, "cannot use TLS or credentials"},
		{"sasl user without password", []string{"lock", "--sasl-user", "zkr", "/x", "--", "true"}, exitUsage, "--sasl-user given without --sasl-password ($ZKR_SASL_PASSWORD)"},
		{"sasl password without user", []string{"inspect", "--sasl-password", "s3cret", "/x"}, exitUsage, "--sasl-password given without --sasl-user ($ZKR_SASL_USER)"},
		{"demo with sasl", []string{"demo", "--servers", "127.0.0.1:1", "--sasl-user", "zkr", "--sasl-password", "s3cret"}, exitUsage, "cannot use TLS or credentials"},
		{"sasl and kerberos", []string{"lock", "--sasl-user", "zkr", "--sasl-password", "s3cret", "--kerberos-principal", "zkr", "--kerberos-password", "s3cret", "--krb5-config", "/dev/null", "/x", "--", "true"}, exitUsage, "a session logs in with one SASL mechanism"},
		{"kerberos keytab without principal", []string{"lock", "--kerberos-keytab", "zkr.keytab", "/x", "--", "true"}, exitUsage, "--kerberos-keytab given without --kerberos-principal"},
		{"kerberos keytab unreadable", []string{"inspect", "--kerberos-principal", "zkr@R", "--krb5-config", "/dev/null", "--kerberos-keytab", "/nonexistent/zkr.keytab", "/x"}, exitUsage, `--kerberos-keytab "/nonexistent/zkr.keytab": cannot read: no such file or directory`},
		{"kerberos config unreadable", []string{"inspect", "--kerberos-principal", "zkr@R", "--krb5-config", "/nonexistent/krb5.conf", "/x"}, exitUsage, `--krb5-config "/nonexistent/krb5.conf": cannot read: no such file or directory`},
		{"kerberos without realm", []string{"inspect", "--kerberos-principal", "zkr", "--kerberos-password", "s3cret", "--krb5-config", "/dev/null", "/x"}, exitUsage, "and a realm"},
		{"server sasl user only", []string{"server", "--sasl-user", "zkr"}, exitUsage, "SASL needs --sasl-user and --sasl-password"},
		{"server require sasl alone", []string{"server", "--require-sasl"}, exitUsage, "--require-sasl needs --sasl-user"},
		{"demo with tls", []string{"demo", "--servers", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem"}, exitUsage, `--tls-ca "/nonexistent/ca.pem": cannot read`},
	}
	check := func(t *testing.T, r result, code int, msg string) {
		t.Helper()
		if r.code != code {
			t.Errorf("exit %d, want %d; stderr %q", r.code, code, r.stderr)
		}
		oneLineError(t, r)
		if !strings.Contains(r.stderr, msg) {
			t.Errorf("stderr %q does not say %q", r.stderr, msg)
		}
		if strings.Contains(r.stderr, "s3cret") {
			t.Errorf("stderr shows the password: %q", r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout should be empty: %q", r.stdout)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, zkr(t, tt.args...), tt.code, tt.msg)
		})
	}

	// The same settings from the environment, named as such.
	envTests := []struct {
		name string
		env  []string
		args []string
		msg  string
	}{
		{"env chroot", []string{"ZKR_SERVERS=127.0.0.1:2181/app/"}, []string{"inspect", "/x"}, `chroot "/app/": trailing slash`},
		{"env tls cert without key", []string{"ZKR_TLS_CERT=client.pem"}, []string{"lock", "/x", "--", "true"}, "$ZKR_TLS_CERT given without --tls-key"},
		{"env tls key without cert", []string{"ZKR_TLS_KEY=client-key.pem"}, []string{"lock", "/x", "--", "true"}, "$ZKR_TLS_KEY given without --tls-cert"},
		{"env tls ca unreadable", []string{"ZKR_TLS_CA=/nonexistent/ca.pem"}, []string{"inspect", "/x"}, `$ZKR_TLS_CA "/nonexistent/ca.pem": cannot read`},
		{"flag over env", []string{"ZKR_TLS_CA=/nonexistent/env.pem"}, []string{"inspect", "--tls-ca", "/nonexistent/flag.pem", "/x"}, `--tls-ca "/nonexistent/flag.pem": cannot read`},
		{"env auth without colon", []string{"ZKR_AUTH=zkr-s3cret"}, []string{"members", "/x"}, "$ZKR_AUTH: expected user:password"},
		{"bench without servers", []string{"ZKR_SERVERS="}, []string{"bench", "--clients", "1"}, "no --servers given"},
	}
	for _, tt := range envTests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, tt.args...)
			code := p.wait(time.Minute)
			check(t, result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}, exitUsage, tt.msg)
		})
	}
}

// TestHelp checks that every command explains itself with an example, and
// that the root help lists the exit codes.
func TestHelp(t *testing.T) {
	help := func(args ...string) (int, string) {
		var out, errs bytes.Buffer
		a := &app{stdout: &out, stderr: &errs, getenv: func(string) string { return "" }}
		code := a.run(context.Background(), append(args, "--help"))
		if errs.Len() > 0 {
			t.Errorf("zkr %v --help wrote on stderr: %q", args, errs.String())
		}
		return code, out.String()
	}
	if code, out := help(); code != 0 || !strings.Contains(out, "Exit status:") || !strings.Contains(out, "5    lock, leadership or membership lost") {
		t.Errorf("zkr --help: exit %d, no exit codes:\n%s", code, out)
	}
	for _, c := range []string{"lock", "elect", "members", "join", "inspect", "demo", "bench"} {
		if code, out := help(c); code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "  zkr "+c) {
			t.Errorf("zkr %s --help: exit %d, no example:\n%s", c, code, out)
		}
	}
}
