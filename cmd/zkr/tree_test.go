package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestExportImportDiff exports a tree holding every kind of node zkr
// knows, imports it elsewhere on the same cluster and on another one, and
// checks with diff that it came back exactly; that an import refuses to
// overwrite and then changes nothing; that --dry-run changes nothing; and
// that a TTL node keeps its TTL (on a second server, with TTL nodes
// allowed).
func TestExportImportDiff(t *testing.T) {
	t.Parallel()
	servers(t)
	// Another server, which allows TTL nodes, starts while the test
	// works on the shared one.
	type started struct {
		c   *zktest.Cluster
		err error
	}
	ttlServer := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(90*time.Second))
		defer cancel()
		c, err := zktest.Start(ctx, zktest.Options{TTL: true})
		ttlServer <- started{c, err}
	}()
	var other *zktest.Cluster
	received := false
	t.Cleanup(func() {
		if !received {
			other = (<-ttlServer).c
		}
		if other != nil {
			other.Close()
		}
	})

	ctx := t.Context()
	c := admin(t)
	src := testPath(t, "src")
	dst := testPath(t, "dst")
	alice := "alice:" + t.Name()
	secretACL := append(zkclient.DigestACL(zkclient.PermAll, "alice", t.Name()), zkclient.WorldACL(zkclient.PermRead)...)
	mkdirs(t, c, src, zkclient.WorldACL(zkclient.PermAll))
	if _, err := c.Set(ctx, src, []byte("root"), -1); err != nil {
		t.Fatal(err)
	}
	open := zkclient.WorldACL(zkclient.PermAll)
	for _, n := range []struct {
		path string
		data []byte
		mode zkclient.CreateMode
		acl  []zkclient.ACL
	}{
		{"/bin", []byte("\x00\xff\xfebinary"), zkclient.Persistent, open},
		{"/null", nil, zkclient.Persistent, open},
		{"/empty", []byte{}, zkclient.Persistent, open},
		{"/secret", []byte("s"), zkclient.Persistent, secretACL},
		{"/secret/inner", []byte("i"), zkclient.Persistent, open},
		{"/box", nil, zkclient.Container, open},
		{"/box/item", []byte("x"), zkclient.Persistent, open},
		{"/eph", []byte("e"), zkclient.Ephemeral, open},
		{"/seq-", []byte("q"), zkclient.PersistentSequential, open},
	} {
		if n.path == "/secret/inner" {
			if err := c.AddAuth(ctx, "digest", []byte(alice)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Create(ctx, src+n.path, n.data, n.mode, n.acl); err != nil {
			t.Fatalf("create %s: %v", n.path, err)
		}
	}

	// Without alice's credentials the server hides her hash: no export.
	r := zkr(t, "export", src)
	if r.code != exitFailure || !strings.Contains(r.stderr, src+"/secret") || !strings.Contains(r.stderr, "--auth") {
		t.Errorf("export without the admin permission on a digest ACL: exit %d, %q", r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "tree.json")
	r = zkr(t, "--auth", alice, "export", src, "-o", file)
	if r.code != 0 || !strings.Contains(r.stderr, "skipped "+src+"/eph: ephemeral, of session 0x") {
		t.Fatalf("export: exit %d, stderr %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var x treeExport
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatalf("export output: %v\n%s", err, b)
	}
	modes := map[string]string{}
	for _, n := range x.Nodes {
		modes[strings.TrimPrefix(n.Path, src)] = n.Mode
	}
	// ZooKeeper does not tell a client which nodes are containers: the
	// container reads as persistent.
	if len(x.Nodes) != 9 || modes["/box"] != modePersistent || modes[""] != modePersistent || modes["/eph"] != "" {
		t.Errorf("export: %d nodes (want 9), modes %v:\n%s", len(x.Nodes), modes, b)
	}
	if !strings.Contains(string(b), `"data":null`) || !strings.Contains(string(b), `"data":""`) || !strings.Contains(string(b), `"data":"AP/+YmluYXJ5"`) {
		t.Errorf("export should keep null, empty and binary data apart:\n%s", b)
	}

	// Import under dst: the same tree, exactly; alice's node needs her
	// credentials to create its child.
	copyRoot := dst + src
	r = zkr(t, "import", file, "--under", dst)
	if r.code != exitFailure || !strings.Contains(r.stderr, "stopped after 10 of 12 steps") || !strings.Contains(r.stderr, "--auth") ||
		!strings.Contains(r.stdout, "create\t"+copyRoot+"/box\tpersistent\n") {
		t.Errorf("import of a child under alice's node without her credentials: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// Run again with them: it picks up where it stopped.
	r = zkr(t, "--auth", alice, "import", file, "--under", dst)
	if r.code != 0 || !strings.Contains(r.stdout, "unchanged\t"+copyRoot+"/box\tpersistent\n") || !strings.Contains(r.stdout, "create\t"+copyRoot+"/secret/inner\tpersistent\n") {
		t.Fatalf("import: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "diff", src, copyRoot); r.code != 0 || r.stdout != "" {
		t.Errorf("diff of the tree and its import: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "diff", src, copyRoot, "--ephemerals"); r.code != exitFailure || r.stdout != "removed\t/eph\n" {
		t.Errorf("diff --ephemerals: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// Run again: everything is there already, nothing to do.
	r = zkr(t, "--auth", alice, "import", file, "--under", dst, "--json")
	var plan struct {
		DryRun bool `json:"dry_run"`
		Steps  []importStep
	}
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || r.code != 0 || len(plan.Steps) != 9 || slices.ContainsFunc(plan.Steps, func(s importStep) bool { return s.Action != "unchanged" }) {
		t.Errorf("import again: exit %d, %q %q (%v)", r.code, r.stdout, r.stderr, err)
	}

	// A changed node stops the import before anything is done.
	if _, err := c.Set(ctx, copyRoot+"/bin", []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, copyRoot+"/null", -1); err != nil {
		t.Fatal(err)
	}
	r = zkr(t, "diff", src, copyRoot, "--json")
	var d struct{ Differences []diffEntry }
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || r.code != exitFailure || len(d.Differences) != 2 ||
		d.Differences[0].Status != "changed" || d.Differences[0].Path != "/bin" ||
		!slices.Equal(d.Differences[0].Changes, []string{"data"}) || d.Differences[1].Status != "removed" {
		t.Errorf("diff after a change: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = zkr(t, "--auth", alice, "import", file, "--under", dst)
	if r.code != exitFailure || !strings.Contains(r.stderr, "nothing was changed; --overwrite") || !strings.Contains(r.stdout, "conflict\t"+copyRoot+"/bin\tdata\n") {
		t.Errorf("import over a changed node: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = zkr(t, "--auth", alice, "import", file, "--under", dst, "--overwrite", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "update\t"+copyRoot+"/bin\tdata\n") || !strings.Contains(r.stdout, "create\t"+copyRoot+"/null\tpersistent\n") {
		t.Errorf("import --overwrite --dry-run: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if data, _, err := c.Get(ctx, copyRoot+"/bin"); err != nil || string(data) != "changed" {
		t.Errorf("a refused import or a dry run changed a node: %q, %v", data, err)
	}
	if _, ok, _ := c.Exists(ctx, copyRoot+"/null"); ok {
		t.Errorf("a refused import or a dry run created a node")
	}
	if r := zkr(t, "--auth", alice, "import", file, "--under", dst, "--overwrite"); r.code != 0 {
		t.Errorf("import --overwrite: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "diff", src, copyRoot); r.code != 0 || r.stdout != "" {
		t.Errorf("diff after import --overwrite: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// Empty data is not no data; an ACL in another order is the same.
	if _, err := c.Set(ctx, copyRoot+"/null", []byte{}, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetACL(ctx, copyRoot+"/bin", zkclient.WorldACL(zkclient.PermRead), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetACL(ctx, copyRoot+"/secret", []zkclient.ACL{secretACL[1], secretACL[0]}, -1); err != nil {
		t.Fatal(err)
	}
	if r := zkr(t, "diff", src, copyRoot); r.code != exitFailure || r.stdout != "changed\t/bin\tacl\nchanged\t/null\tdata\n" {
		t.Errorf("diff of no data with empty data, of another ACL: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	// Another cluster, which allows TTL nodes: import at the same paths
	// (from standard input), diff across clusters.
	st := <-ttlServer
	received, other = true, st.c
	zktest.SkipOrFail(t, st.err)
	b2 := other.Addr(0)
	if r := zkrIn(t, string(b), "--servers", b2, "--auth", alice, "import", "-"); r.code != 0 {
		t.Fatalf("import on another cluster: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "diff", src, "--to", b2); r.code != 0 || r.stdout != "" {
		t.Errorf("diff --to after an import there: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	c2 := client(t, []string{b2})
	if _, err := c2.Create(ctx, src+"/extra", []byte("t"), zkclient.Persistent, open); err != nil {
		t.Fatal(err)
	}
	if r := zkr(t, "diff", src, "--to", b2); r.code != exitFailure || r.stdout != "added\t/extra\n" {
		t.Errorf("diff --to with a node added there: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	// Modes given in the file (export cannot know them): a container and
	// a TTL node, which the shared server refuses and the other creates.
	for _, n := range x.Nodes {
		switch strings.TrimPrefix(n.Path, src) {
		case "/box":
			n.Mode = modeContainer
		case "/empty":
			n.Mode, n.TTL = modeTTL, time.Hour.Milliseconds()
		}
	}
	edited := filepath.Join(t.TempDir(), "edited.json")
	f, err := os.Create(edited)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeExport(f, &x); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	if r := zkr(t, "--auth", alice, "import", edited, "--under", dst+"/ttl"); r.code != exitFailure || !strings.Contains(r.stderr, "extendedTypesEnabled") {
		t.Errorf("import of a TTL node where they are not allowed: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = zkr(t, "--servers", b2, "--auth", alice, "import", edited, "--under", dst)
	if r.code != 0 || !strings.Contains(r.stdout, "create\t"+copyRoot+"/box\tcontainer\n") || !strings.Contains(r.stdout, "create\t"+copyRoot+"/empty\tttl=1h0m0s\n") {
		t.Fatalf("import of a container and a TTL node: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "--servers", b2, "diff", src, copyRoot); r.code != exitFailure || r.stdout != "removed\t/extra\n" {
		t.Errorf("diff of a tree and its import with modes: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// Again: the container and the TTL node read as persistent nodes, and
	// are taken to be what the file says.
	r = zkr(t, "--servers", b2, "--auth", alice, "import", edited, "--under", dst)
	if r.code != 0 || !strings.Contains(r.stdout, "unchanged\t"+copyRoot+"/box\tcontainer\n") || strings.Contains(r.stdout, "create") {
		t.Errorf("import again of a container and a TTL node: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	// Bad files and arguments: exit 2, nothing sent.
	bad := filepath.Join(t.TempDir(), "bad.json")
	for _, content := range []string{
		`{}`,
		`{"format":"zkr-export/1","path":"/a","nodes":[{"path":"/b","data":null,"acl":[{"scheme":"world","id":"anyone","perms":"r"}],"mode":"persistent"}]}`,
		`{"format":"zkr-export/1","path":"/a","nodes":[{"path":"/a","data":null,"acl":[{"scheme":"world","id":"anyone","perms":"rx"}],"mode":"persistent"}]}`,
		`{"format":"zkr-export/1","path":"/a","nodes":[{"path":"/a","data":null,"acl":[],"mode":"persistent"}]}`,
		`{"format":"zkr-export/1","path":"/a","nodes":[{"path":"/a","data":null,"acl":[{"scheme":"world","id":"anyone","perms":"r"}],"mode":"ephemeral"}]}`,
		`{"format":"zkr-export/1","path":"/a","nodes":[{"path":"/a","data":null,"acl":[{"scheme":"world","id":"anyone","perms":"r"}],"mode":"persistent"},{"path":"/a/b/c","data":null,"acl":[{"scheme":"world","id":"anyone","perms":"r"}],"mode":"persistent"}]}`,
	} {
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := zkrLocal(t, "import", bad)
		if r.code != exitUsage {
			t.Errorf("import of %s: exit %d, want %d; %q", content, r.code, exitUsage, r.stderr)
		}
		oneLineError(t, r)
	}
	for _, args := range [][]string{{"diff", src}, {"diff"}, {"import"}, {"export"}, {"import", file, "--under", "rel"}} {
		if r := zkrLocal(t, args...); r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; %q", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestACLCommands sets an ACL with acl set and reads it back with acl get.
func TestACLCommands(t *testing.T) {
	t.Parallel()
	servers(t)
	p := testPath(t, "node")
	mkdirs(t, admin(t), p, zkclient.WorldACL(zkclient.PermAll))
	digest := zkclient.DigestACL(zkclient.PermAll, "bob", "pw")[0].ID
	if r := zkr(t, "acl", "set", p, "world:anyone:r,digest:"+digest+":cdrwa", "ip:127.0.0.1:rw"); r.code != 0 {
		t.Fatalf("acl set: exit %d, %q", r.code, r.stderr)
	}
	want := "world:anyone:r\ndigest:" + digest + ":cdrwa\nip:127.0.0.1:rw\n"
	if r := zkr(t, "--auth", "bob:pw", "acl", "get", p); r.code != 0 || r.stdout != want {
		t.Errorf("acl get: exit %d, %q, want %q; %q", r.code, r.stdout, want, r.stderr)
	}
	r := zkr(t, "--auth", "bob:pw", "acl", "get", p, "--json")
	var v aclView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.ACLVersion != 1 || len(v.ACL) != 3 || v.ACL[1] != (aclEntry{"digest", digest, "cdrwa"}) {
		t.Errorf("acl get --json: %q (%v)", r.stdout, err)
	}
	// Without bob, no admin permission: the ACL is refused, and its hash hidden.
	if r := zkr(t, "acl", "set", p, "world:anyone:cdrwa"); r.code != exitFailure || !strings.Contains(r.stderr, "--auth") {
		t.Errorf("acl set without the admin permission: exit %d, %q", r.code, r.stderr)
	}
	if r := zkr(t, "acl", "get", p); !strings.Contains(r.stdout, "digest:bob:x:cdrwa") {
		t.Errorf("acl get without the admin permission: %q", r.stdout)
	}
	if r := zkr(t, "--auth", "bob:pw", "acl", "set", p, "world:anyone:cdrwa", "--version", "0"); r.code != exitFailure || !strings.Contains(r.stderr, "bad version") {
		t.Errorf("acl set at a stale version: exit %d, %q", r.code, r.stderr)
	}
	if r := zkr(t, "--auth", "bob:pw", "acl", "set", p, "world:anyone:cdrwa", "--version", "1"); r.code != 0 {
		t.Errorf("acl set at the current version: exit %d, %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"acl", "set", p},
		{"acl", "set", p, "world:anyone:rx"},
		{"acl", "set", p, "world"},
		{"acl", "set", p, ":anyone:r"},
		{"acl", "get"},
		{"acl"},
	} {
		r := zkrLocal(t, args...)
		if r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; %q", args, r.code, exitUsage, r.stderr)
		}
		oneLineError(t, r)
	}
	if r := zkr(t, "acl", "get", p); r.stdout != "world:anyone:cdrwa\n" {
		t.Errorf("bad input changed the ACL: %q", r.stdout)
	}
}

// TestParseACL checks the splitting of comma-separated ACL entries, ids
// with colons and commas among them.
func TestParseACL(t *testing.T) {
	got, err := parseACL([]string{"world:anyone:r,x509:CN=a,O=b:rw,digest:u:h=:cdrwa", "ip:::1:a", "auth::cdrwa"})
	want := []aclEntry{{"world", "anyone", "r"}, {"x509", "CN=a,O=b", "rw"}, {"digest", "u:h=", "cdrwa"}, {"ip", "::1", "a"}, {"auth", "", "cdrwa"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseACL: %v, %v; want %v", got, err, want)
	}
	for perms := int32(0); perms <= zkclient.PermAll; perms++ {
		if p, err := parsePerms(permString(perms)); err != nil || p != perms {
			t.Errorf("perms %d: %q back to %d, %v", perms, permString(perms), p, err)
		}
	}
}

// TestOperatorQueries covers whoami, sync, count and ephemerals.
func TestOperatorQueries(t *testing.T) {
	t.Parallel()
	addr := servers(t)
	ctx := t.Context()
	base := testPath(t, "tree")
	c := admin(t)
	mkdirs(t, c, base+"/a/b", zkclient.WorldACL(zkclient.PermAll))
	owner := client(t, []string{addr})
	other := client(t, []string{addr})
	open := zkclient.WorldACL(zkclient.PermAll)
	for _, p := range []string{base + "/e1", base + "/a/e2"} {
		if _, err := owner.Create(ctx, p, nil, zkclient.Ephemeral, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Create(ctx, base+"/a/b/e3", nil, zkclient.Ephemeral, open); err != nil {
		t.Fatal(err)
	}

	if r := zkr(t, "--auth", "carol:pw", "whoami"); r.code != 0 || !strings.Contains(r.stdout, "digest\tcarol\n") || !strings.Contains(r.stdout, "ip\t127.0.0.1\n") {
		t.Errorf("whoami: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r := zkr(t, "whoami", "--json")
	var who struct {
		Session    string
		Identities []identityView
	}
	if err := json.Unmarshal([]byte(r.stdout), &who); err != nil || !strings.HasPrefix(who.Session, "0x") || len(who.Identities) != 1 || who.Identities[0].Scheme != "ip" {
		t.Errorf("whoami --json: %q (%v)", r.stdout, err)
	}
	if r := zkr(t, "sync", base); r.code != 0 || r.stdout != addr+"\n" {
		t.Errorf("sync: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	if r := zkr(t, "count", base); r.code != 0 || r.stdout != "5\n" {
		t.Errorf("count: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := zkr(t, "count", base, "--json"); r.stdout != `{"path":"`+base+`","descendants":5}`+"\n" {
		t.Errorf("count --json: %q", r.stdout)
	}
	if r := zkr(t, "count", base+"/nope"); r.code != exitFailure || !strings.Contains(r.stderr, "node does not exist") {
		t.Errorf("count of a missing node: exit %d, %q", r.code, r.stderr)
	}

	o, s := sessionIDHex(owner.SessionID()), sessionIDHex(other.SessionID())
	want := base + "/a/b/e3\t" + s + "\n" + base + "/a/e2\t" + o + "\n" + base + "/e1\t" + o + "\n"
	if r := zkr(t, "ephemerals", base); r.code != 0 || r.stdout != want {
		t.Errorf("ephemerals: exit %d, %q, want %q; %q", r.code, r.stdout, want, r.stderr)
	}
	r = zkr(t, "ephemerals", base, "--session", o, "--json")
	var eph []ephemeralView
	if err := json.Unmarshal([]byte(r.stdout), &eph); err != nil || len(eph) != 2 || eph[0] != (ephemeralView{base + "/a/e2", o}) || eph[1].Path != base+"/e1" {
		t.Errorf("ephemerals --session --json: %q (%v)", r.stdout, err)
	}
	for _, args := range [][]string{{"ephemerals", "--session", "zz"}, {"count"}, {"sync", "/a", "/b"}, {"whoami", "x"}} {
		if r := zkrLocal(t, args...); r.code != exitUsage {
			t.Errorf("zkr %q: exit %d, want %d; %q", args, r.code, exitUsage, r.stderr)
		}
	}
}

// zkrLocal runs zkr in the test's process, on the shared server: for bad
// input, which zkr refuses before connecting, without a process each.
func zkrLocal(t *testing.T, args ...string) result {
	t.Helper()
	var out, errs strings.Builder
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, getenv: func(k string) string {
		if k == "ZKR_SERVERS" {
			return shared.Addr(0)
		}
		return ""
	}}
	code := a.run(t.Context(), args)
	return result{code: code, stdout: out.String(), stderr: errs.String()}
}
