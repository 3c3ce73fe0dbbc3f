package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// TestWatch follows a tree with zkr watch, as text, as JSON and for one
// node only, through a change, a create and a delete.
func TestWatch(t *testing.T) {
	servers(t)
	conn := admin(t)
	path := testPath(t, "tree")
	acl := zkclient.WorldACL(zkclient.PermAll)
	ctx := context.Background()
	for _, p := range []string{"/zkrtest", strings.TrimSuffix(path, "/tree"), path} {
		conn.Create(ctx, p, nil, zkclient.Persistent, acl)
	}
	t.Cleanup(func() { conn.Delete(ctx, strings.TrimSuffix(path, "/tree"), -1) })
	if _, err := conn.Create(ctx, path+"/a", []byte("one"), zkclient.Persistent, acl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Delete(ctx, path+"/b", -1)
		conn.Delete(ctx, path+"/a", -1)
		conn.Delete(ctx, path, -1)
	})
	text := start(t, nil, "watch", path)
	js := start(t, nil, "watch", path, "--json")
	node := start(t, nil, "watch", path+"/a", "--node")
	want := "created " + path + ` v0 ""` + "\n" +
		"created " + path + "/a v0 one\n" +
		"initialized " + path + "\n"
	// Each change is made once the previous one is printed: changes that
	// follow each other faster may be merged.
	steps := []struct {
		do   func() error
		line string
	}{
		{func() error { _, err := conn.Set(ctx, path+"/a", []byte("two words"), -1); return err }, "changed " + path + "/a v1 two words\n"},
		{func() error { _, err := conn.Create(ctx, path+"/b", []byte(" "), zkclient.Persistent, acl); return err }, "created " + path + `/b v0 " "` + "\n"},
		{func() error { return conn.Delete(ctx, path+"/b", -1) }, "deleted " + path + `/b v0 " "` + "\n"},
	}
	// The --node watcher too must have read the tree before the first
	// change, or it starts from the changed node.
	nodeInit := "created " + path + "/a v0 one\ninitialized " + path + "/a\n"
	eventually(t, 10*time.Second, "zkr watch --node did not print "+nodeInit, func() bool {
		return node.stdout.String() == nodeInit
	})
	for i := 0; ; i++ {
		eventually(t, 10*time.Second, "zkr watch did not print "+want, func() bool {
			return text.stdout.String() == want && strings.Count(js.stdout.String(), "\n") == strings.Count(want, "\n")
		})
		if i == len(steps) {
			break
		}
		if err := steps[i].do(); err != nil {
			t.Fatal(err)
		}
		want += steps[i].line
	}
	wantNode := "created " + path + "/a v0 one\ninitialized " + path + "/a\nchanged " + path + "/a v1 two words\n"
	eventually(t, 10*time.Second, "zkr watch --node did not print the change", func() bool {
		return node.stdout.String() == wantNode
	})
	var lines []watchLine
	for _, l := range strings.Split(strings.TrimSpace(js.stdout.String()), "\n") {
		var w watchLine
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("zkr watch --json printed %q: %v", l, err)
		}
		lines = append(lines, w)
	}
	if l := lines[3]; l.Type != "changed" || l.Path != path+"/a" || l.Data == nil || *l.Data != "two words" || l.Version == nil || *l.Version != 1 || l.Mzxid <= l.Czxid {
		t.Errorf("zkr watch --json: change line %+v", l)
	}
	if l := lines[2]; l.Type != "initialized" || l.Path != path || l.Version != nil {
		t.Errorf("zkr watch --json: initialized line %+v", l)
	}

	for _, p := range []*proc{text, js, node} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(10 * time.Second); code != 0 {
			t.Errorf("zkr watch exited %d on SIGTERM; stderr:\n%s", code, p.stderr.String())
		}
	}
	r := zkr(t, "watch", "relative")
	if r.code != exitUsage {
		t.Errorf("zkr watch relative: exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
	}
	oneLineError(t, r)
}
