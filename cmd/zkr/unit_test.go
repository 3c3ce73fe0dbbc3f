package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestServerList(t *testing.T) {
	tests := []struct {
		flag, env string
		want      []string
		chosen    bool
		bad       bool
	}{
		{"", "", []string{"127.0.0.1:2181"}, false, false},
		{"", "zk1:2182,zk2", []string{"zk1:2182", "zk2:2181"}, true, false},
		{"a:1, b:2", "zk1:2182", []string{"a:1", "b:2"}, true, false},
		{"[::1]:2181", "", []string{"[::1]:2181"}, true, false},
		{"a:1,,b:2", "", nil, false, true},
		{"a:port", "", nil, false, true},
		{"a:70000", "", nil, false, true},
	}
	for _, tt := range tests {
		a := &app{servers: tt.flag, getenv: func(k string) string {
			if k == "ZKR_SERVERS" {
				return tt.env
			}
			return ""
		}}
		got, chosen, err := a.serverList()
		if tt.bad {
			var e *exitError
			if !errors.As(err, &e) || e.code != exitUsage {
				t.Errorf("flag %q env %q: error %v, want a usage error", tt.flag, tt.env, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) || chosen != tt.chosen {
			t.Errorf("flag %q env %q: %v %v %v, want %v %v", tt.flag, tt.env, got, chosen, err, tt.want, tt.chosen)
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
