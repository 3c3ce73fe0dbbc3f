package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

func TestServerList(t *testing.T) {
	tests := []struct {
		flag, env string
		want      []string
		chroot    string
		chosen    bool
		bad       bool
	}{
		{"", "", []string{"127.0.0.1:2181"}, "", false, false},
		{"", "zk1:2182,zk2", []string{"zk1:2182", "zk2:2181"}, "", true, false},
		{"a:1, b:2", "zk1:2182", []string{"a:1", "b:2"}, "", true, false},
		{"[::1]:2181", "", []string{"[::1]:2181"}, "", true, false},
		{"a:1,b:2/app/x", "", []string{"a:1", "b:2"}, "/app/x", true, false},
		{"", "zk1/app", []string{"zk1:2181"}, "/app", true, false},
		{"a:1/", "", []string{"a:1"}, "", true, false},
		{"a:1,,b:2", "", nil, "", false, true},
		{"a:port", "", nil, "", false, true},
		{"a:70000", "", nil, "", false, true},
		{"a:1/app/", "", nil, "", false, true},
		{"a:1/app//x", "", nil, "", false, true},
		{"/app", "", nil, "", false, true},
	}
	for _, tt := range tests {
		a := &app{servers: tt.flag, getenv: func(k string) string {
			if k == "ZKR_SERVERS" {
				return tt.env
			}
			return ""
		}}
		got, chroot, chosen, err := a.serverList()
		if tt.bad {
			var e *exitError
			if !errors.As(err, &e) || e.code != exitUsage {
				t.Errorf("flag %q env %q: error %v, want a usage error", tt.flag, tt.env, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) || chroot != tt.chroot || chosen != tt.chosen {
			t.Errorf("flag %q env %q: %v %q %v %v, want %v %q %v", tt.flag, tt.env, got, chroot, chosen, err, tt.want, tt.chroot, tt.chosen)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"host-a:8080":           "host-a:8080",
		"\x00\x01":              "(2 bytes)",
		strings.Repeat("x", 81): "(81 bytes)",
	} {
		if got := printable([]byte(in)); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReport(t *testing.T) {
	var b bytes.Buffer
	if code := report(&b, nil, status(7)); code != 7 || b.Len() != 0 {
		t.Errorf("a command's status: %d %q", code, b.String())
	}
	if code := report(&b, nil, codef(exitLost, "lost\nit")); code != exitLost || b.String() != "zkr: lost it\n" {
		t.Errorf("lost: %d %q", code, b.String())
	}
	b.Reset()
	if code := report(&b, nil, errors.New("unknown flag: --x")); code != exitUsage || !strings.Contains(b.String(), "(see zkr --help)") {
		t.Errorf("cobra's error: %d %q", code, b.String())
	}
}

// TestConnectError checks the exit status and message of a failed connect:
// refused credentials are a ZooKeeper error (1), anything else a failure to
// connect (6) that names the last server's reason.
func TestConnectError(t *testing.T) {
	a := &app{connectTimeout: 2 * time.Second, getenv: func(string) string { return "" }}
	noServer := fmt.Errorf("zkrecipes: connect: %w", fmt.Errorf("%w: %w", zkclient.ErrNoServer, errors.Join(
		errors.New("127.0.0.1:1: dial tcp 127.0.0.1:1: connection refused"),
		errors.New("127.0.0.1:2: handshake: EOF"),
		context.DeadlineExceeded)))
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{fmt.Errorf("zkrecipes: connect: zookeeper: authenticate: %w", zkclient.ErrAuthFailed), exitFailure, "ZooKeeper at zk:2181 refused the credentials (see --auth, --sasl-user, --kerberos-principal, --tls-cert)"},
		{noServer, exitConnect, "cannot connect to ZooKeeper at zk:2181 within 2s (127.0.0.1:2: handshake: EOF; is it running?"},
		{errors.New("zkrecipes: connect: something"), exitConnect, "cannot connect to ZooKeeper at zk:2181: zkrecipes: connect: something (is it running?"},
	}
	for _, tt := range tests {
		err := a.connectError("zk:2181", tt.err)
		var e *exitError
		if !errors.As(err, &e) || e.code != tt.code || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("connectError(%q) = %v, want exit %d and %q", tt.err, err, tt.code, tt.msg)
		}
	}
}

// TestSecuritySettings checks that a flag wins over its variable and that
// the digest credentials are split at the first colon.
func TestSecuritySettings(t *testing.T) {
	env := map[string]string{"ZKR_AUTH": "env-user:env-pw", "ZKR_TLS_CA": "/nonexistent/env.pem"}
	a := &app{getenv: func(k string) string { return env[k] }}
	if user, pw, ok, err := a.digestAuth(); !ok || err != nil || user != "env-user" || pw != "env-pw" {
		t.Errorf("$ZKR_AUTH: %q %q %v %v", user, pw, ok, err)
	}
	a.auth = "flag-user:pw:with:colons"
	if user, pw, ok, err := a.digestAuth(); !ok || err != nil || user != "flag-user" || pw != "pw:with:colons" {
		t.Errorf("--auth over $ZKR_AUTH: %q %q %v %v", user, pw, ok, err)
	}
	if _, err := a.tlsConfig(); err == nil || !strings.Contains(err.Error(), `$ZKR_TLS_CA "/nonexistent/env.pem"`) {
		t.Errorf("$ZKR_TLS_CA: %v", err)
	}
	a.tlsCA = "/nonexistent/flag.pem"
	if _, err := a.tlsConfig(); err == nil || !strings.Contains(err.Error(), `--tls-ca "/nonexistent/flag.pem"`) {
		t.Errorf("--tls-ca over $ZKR_TLS_CA: %v", err)
	}
	if cfg, err := (&app{getenv: func(string) string { return "" }}).tlsConfig(); cfg != nil || err != nil {
		t.Errorf("no TLS settings: %v %v", cfg, err)
	}
}
