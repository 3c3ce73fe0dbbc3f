package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := zkr(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tt.code, r.stderr)
			}
			oneLineError(t, r)
			if !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("stderr %q does not say %q", r.stderr, tt.msg)
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty: %q", r.stdout)
			}
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
