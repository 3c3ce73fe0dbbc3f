package main

import (
	"bytes"
	"errors"
	"fmt"
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

func TestRank(t *testing.T) {
	queue := func(names ...string) []contenderView {
		var cs []contenderView
		for i, n := range names {
			cv, _, ok := parseNode(fmt.Sprintf("_c_%036d-%s%010d", i, n, i))
			if !ok {
				t.Fatalf("%s not recognised", n)
			}
			cs = append(cs, cv)
		}
		return cs
	}
	show := func(cs []contenderView) string {
		var b strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&b, "%s:%s:%d ", c.Kind, c.State, c.WaitsFor)
		}
		return strings.TrimSpace(b.String())
	}
	tests := []struct {
		cs   []contenderView
		rw   bool
		want string
	}{
		{queue("lock-", "lock-", "lock-"), false, "mutex:holds:0 mutex:waits:1 mutex:waits:2"},
		{queue("latch-", "latch-"), false, "candidate:leads:0 candidate:waits:1"},
		{queue("__READ__", "__READ__", "__WRIT__", "__READ__", "__WRIT__", "__READ__"), true,
			"reader:holds:0 reader:holds:0 writer:waits:2 reader:waits:3 writer:waits:4 reader:waits:5"},
		{queue("__WRIT__", "__READ__", "__rlock__", "__lock__"), true, "writer:holds:0 reader:waits:1 reader:waits:1 writer:waits:3"},
	}
	for _, tt := range tests {
		rank(tt.cs, tt.rw)
		if got := show(tt.cs); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
	for _, name := range []string{"member-a", "lock-", "lock-12345", "x-lock-abcdefghij", "lock-9999999999"} {
		if _, _, ok := parseNode(name); ok {
			t.Errorf("%q taken for a contender", name)
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
