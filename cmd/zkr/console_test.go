package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/zkadmin"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// testConsole is a console over a session of its own on the shared
// server, served on a loopback listener.
type testConsole struct {
	*console
	srv *httptest.Server
	s   *zkrecipes.Session
}

func newTestConsole(t *testing.T, opts consoleOptions) *testConsole {
	t.Helper()
	addr := servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	return newTestConsoleOn(t, s, opts)
}

// newTestConsoleOn is newTestConsole on the session s, which it closes at
// the end.
func newTestConsoleOn(t *testing.T, s *zkrecipes.Session, opts consoleOptions) *testConsole {
	t.Helper()
	addr := servers(t)
	if opts.Servers == nil {
		opts.Servers = []string{addr}
	}
	if opts.Token == "" {
		opts.Token = newToken()
	}
	c := newConsole(s, opts)
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		c.Close()
		srv.Close()
		s.Close()
	})
	return &testConsole{console: c, srv: srv, s: s}
}

// do sends a request to the console with the given headers and returns its
// status and body.
func (tc *testConsole) do(t *testing.T, method, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, tc.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := tc.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// mkNode creates path (and its parents) with data, removed at the end.
func mkNode(t *testing.T, s *zkrecipes.Session, path, data string) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateParents(ctx, path, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, path, []byte(data), 0, nil); err != nil {
		t.Fatal(err)
	}
	root := path[:strings.Index(path[len("/zkrtest/"):], "/")+len("/zkrtest/")]
	t.Cleanup(func() { s.DeleteTree(context.Background(), root) })
}

func nodeData(t *testing.T, s *zkrecipes.Session, path string) string {
	t.Helper()
	d, _, err := s.Get(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return string(d)
}

// TestConsoleWritesNeedToken: with --allow-writes, a write is refused
// (403) and changes nothing unless it carries the run's token, comes from
// the console's own origin and is JSON; a read-only console refuses even a
// write with the token; a recursive delete needs the path typed again.
func TestConsoleWritesNeedToken(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{AllowWrites: true})
	path := testPath(t, "cfg")
	mkNode(t, tc.s, path, "v1")
	body := `{"path":"` + path + `","data":"v2"}`
	jsonCT := "application/json"
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", map[string]string{"Content-Type": jsonCT}, http.StatusForbidden},
		{"wrong token", map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": strings.Repeat("0", 32)}, http.StatusForbidden},
		{"cross-site fetch with the token", map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site other port with the token", map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token, "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign Origin with the token", map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"form body with the token", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Zkr-Token": tc.opts.Token}, http.StatusUnsupportedMediaType},
	} {
		code, out := tc.do(t, "POST", "/api/set", body, c.hdr)
		if code != c.want {
			t.Errorf("%s: status %d, want %d (%s)", c.name, code, c.want, out)
		}
		if got := nodeData(t, tc.s, path); got != "v1" {
			t.Fatalf("%s: the refused write changed the node to %q", c.name, got)
		}
	}
	// A non-JSON body would also be refused by the server's decoding:
	// the 403s above must come before it.
	if code, out := tc.do(t, "POST", "/api/set", body, map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token, "Origin": tc.srv.URL, "Sec-Fetch-Site": "same-origin"}); code != http.StatusOK {
		t.Fatalf("write with the token from the page: status %d: %s", code, out)
	}
	if got := nodeData(t, tc.s, path); got != "v2" {
		t.Fatalf("after the accepted write the node holds %q, want v2", got)
	}

	// Recursive delete: refused without the path typed again.
	mkNode(t, tc.s, path+"/child", "")
	ok := map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token}
	if code, out := tc.do(t, "POST", "/api/delete", `{"path":"`+path+`","recursive":true}`, ok); code != http.StatusBadRequest || !strings.Contains(out, "typed again") {
		t.Errorf("recursive delete without confirm: status %d: %s", code, out)
	}
	if _, there, _ := tc.s.Exists(context.Background(), path+"/child"); !there {
		t.Fatal("the unconfirmed recursive delete deleted")
	}
	if code, out := tc.do(t, "POST", "/api/delete", `{"path":"`+path+`","recursive":true,"confirm":"`+path+`"}`, ok); code != http.StatusOK {
		t.Errorf("confirmed recursive delete: status %d: %s", code, out)
	}
	if _, there, _ := tc.s.Exists(context.Background(), path); there {
		t.Error("the confirmed recursive delete left the node")
	}

	ro := newTestConsole(t, consoleOptions{})
	mkNode(t, ro.s, path, "v1")
	if code, _ := ro.do(t, "POST", "/api/set", body, map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": ro.opts.Token}); code != http.StatusForbidden {
		t.Errorf("read-only console: write with its token: status %d, want 403", code)
	}
	if got := nodeData(t, ro.s, path); got != "v1" {
		t.Errorf("read-only console changed the node to %q", got)
	}
}

// TestConsoleACL: with --allow-writes, /api/acl replaces a node's ACL
// only with the run's token, and only if the node's ACL is still at the
// version given; a bad entry is refused (400, naming it) before anything
// is sent to ZooKeeper; ZooKeeper's refusals (no node, an ACL it finds
// invalid, no admin permission) come back as such; a read-only console
// refuses. Each refusal leaves the ACL as it was, as the server tells it.
func TestConsoleACL(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{AllowWrites: true})
	path := testPath(t, "cfg")
	mkNode(t, tc.s, path, "v1")
	adm := admin(t)
	aclOf := func() string { // the server's ACL of path, and its version
		t.Helper()
		acl, st, err := adm.GetACL(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		var es []string
		for _, e := range viewACL(acl) {
			es = append(es, e.String())
		}
		return strings.Join(es, " ") + " @" + strconv.Itoa(int(st.Aversion))
	}
	if got := aclOf(); got != "world:anyone:cdrwa @0" {
		t.Fatalf("the node's ACL to start with: %s", got)
	}
	digest := zkclient.DigestACL(zkclient.PermAll, "bob", "pw")[0].ID
	body := func(p string, version int, acl ...string) string {
		b, _ := json.Marshal(map[string]any{"path": p, "acl": acl, "version": version})
		return string(b)
	}
	jsonCT := "application/json"
	ok := map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": tc.opts.Token}
	want := "world:anyone:cdrwa @0"
	check := func(what string, code int, out string, wantCode int, wantIn string) {
		t.Helper()
		if code != wantCode || !strings.Contains(out, wantIn) {
			t.Errorf("%s: status %d, %s; want %d and %q", what, code, out, wantCode, wantIn)
		}
		if got := aclOf(); got != want {
			t.Fatalf("%s: the ACL is %s, want %s", what, got, want)
		}
	}

	next := body(path, 0, "world:anyone:rwa", "digest:"+digest+":r")
	code, out := tc.do(t, "POST", "/api/acl", next, map[string]string{"Content-Type": jsonCT})
	check("no token", code, out, http.StatusForbidden, "token")
	code, out = tc.do(t, "POST", "/api/acl", next, map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": strings.Repeat("0", 32)})
	check("wrong token", code, out, http.StatusForbidden, "token")

	// Bad entries: refused by the parser zkr acl set uses, naming the entry.
	for _, c := range []struct {
		acl    []string
		wantIn string // in the JSON answer: quotes escaped
	}{
		{[]string{"world:anyone:r", "world:anyone:rx"}, `ACL entry \"world:anyone:rx\"`},
		{[]string{"world:anyone:r", "anyone"}, `ACL entry \"anyone\"`},
		{[]string{"world:anyone:r,ip:10.0.0.1"}, `ACL entry \"ip:10.0.0.1\"`},
		{[]string{}, "no ACL entry"},
	} {
		code, out := tc.do(t, "POST", "/api/acl", body(path, 0, c.acl...), ok)
		check(fmt.Sprintf("bad ACL %q", c.acl), code, out, http.StatusBadRequest, c.wantIn)
	}

	code, out = tc.do(t, "POST", "/api/acl", next, ok)
	want = "world:anyone:rwa digest:" + digest + ":r @1"
	check("with the token", code, out, http.StatusOK, `"aclVersion":1`)
	// The node view tells the ACL and the version to give next.
	var v consoleNode
	if code, out := tc.do(t, "GET", "/api/node?path="+url.QueryEscape(path), "", nil); code != http.StatusOK || json.Unmarshal([]byte(out), &v) != nil ||
		v.ACLVersion != 1 || len(v.ACL) != 2 || v.ACL[1] != (aclEntry{"digest", digest, "r"}) {
		t.Errorf("the node view after the change: status %d, %s", code, out)
	}

	// A change from the version read before it: refused, as changed meanwhile.
	code, out = tc.do(t, "POST", "/api/acl", body(path, 0, "world:anyone:cdrwa"), ok)
	check("a stale version", code, out, http.StatusConflict, "changed since it was read")

	// ZooKeeper's refusals.
	code, out = tc.do(t, "POST", "/api/acl", body(path+"/nope", -1, "world:anyone:cdrwa"), ok)
	check("no such node", code, out, http.StatusNotFound, "node does not exist")
	code, out = tc.do(t, "POST", "/api/acl", body(path, 1, "auth::cdrwa"), ok)
	check("auth:: on a session without auth", code, out, http.StatusBadRequest, "invalid ACL")
	code, out = tc.do(t, "POST", "/api/acl", body(path, 1, "world:anyone:r"), ok)
	want = "world:anyone:r @2"
	check("giving up the admin permission", code, out, http.StatusOK, `"aclVersion":2`)
	code, out = tc.do(t, "POST", "/api/acl", body(path, 2, "world:anyone:cdrwa"), ok)
	check("without the admin permission", code, out, http.StatusForbidden, "admin permission")

	ro := newTestConsole(t, consoleOptions{})
	code, out = ro.do(t, "POST", "/api/acl", body(path, -1, "world:anyone:cdrwa"), map[string]string{"Content-Type": jsonCT, "X-Zkr-Token": ro.opts.Token})
	check("read-only console, with its token", code, out, http.StatusForbidden, "read-only")
}

// TestConsoleCrossSite: a form posted by another site's page (what a
// browser sends: a form body, the other Origin, Sec-Fetch-Site
// cross-site, no token header) is refused and changes nothing; so is a
// read through a name that is not loopback (DNS rebinding); a public
// console refuses reads without the token.
func TestConsoleCrossSite(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{AllowWrites: true})
	path := testPath(t, "cfg")
	mkNode(t, tc.s, path, "v1")
	form := url.Values{"path": {path}, "data": {"pwned"}}.Encode()
	for _, ep := range []string{"/api/set", "/api/delete", "/api/create", "/api/acl"} {
		code, out := tc.do(t, "POST", ep, form, map[string]string{
			"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example",
			"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
		})
		if code != http.StatusForbidden {
			t.Errorf("cross-site form post to %s: status %d, want 403 (%s)", ep, code, out)
		}
	}
	if got := nodeData(t, tc.s, path); got != "v1" {
		t.Errorf("a cross-site form post changed the node to %q", got)
	}

	req, _ := http.NewRequest("GET", tc.srv.URL+"/api/node?path="+url.QueryEscape(path), nil)
	req.Host = "evil.example:80"
	res, err := tc.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("read through Host evil.example: status %d, want 403", res.StatusCode)
	}

	pub := newTestConsole(t, consoleOptions{RequireToken: true})
	if code, _ := pub.do(t, "GET", "/api/node?path=/", "", nil); code != http.StatusForbidden {
		t.Errorf("public console, read without the token: status %d, want 403", code)
	}
	if code, out := pub.do(t, "GET", "/api/node?path=/", "", map[string]string{"X-Zkr-Token": pub.opts.Token}); code != http.StatusOK {
		t.Errorf("public console, read with the token: status %d: %s", code, out)
	}
}

// TestConsolePublicAddrRefused: zkr console on a non-loopback address
// refuses to start without --public, before connecting to anything.
func TestConsolePublicAddrRefused(t *testing.T) {
	r := zkr(t, "--servers", "127.0.0.1:1", "console", "--addr", "0.0.0.0:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") || !strings.Contains(r.stderr, "--public") {
		t.Errorf("console --addr 0.0.0.0:0: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLineError(t, r)
}

// TestConsoleEvents: the event stream tells the console's connection
// state first; a change under the shown subtree reaches it within a
// second.
func TestConsoleEvents(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{})
	path := testPath(t, "tree")
	mkNode(t, tc.s, path+"/a", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", tc.srv.URL+"/api/events?path="+url.QueryEscape(path), nil)
	res, err := tc.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: status %d, %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = line[7:]
			case strings.HasPrefix(line, "data: "):
				events <- ev + " " + line[6:]
			}
		}
	}()
	next := func(d time.Duration) string {
		select {
		case e := <-events:
			return e
		case <-time.After(zktest.Bound(d)):
			t.Fatalf("no event within %v", zktest.Bound(d))
		}
		return ""
	}
	if e := next(10 * time.Second); !strings.HasPrefix(e, "ready ") {
		t.Fatalf("first event %q, want ready", e)
	}
	var cs connState
	if e := next(time.Second); !strings.HasPrefix(e, "conn ") || json.Unmarshal([]byte(e[5:]), &cs) != nil ||
		cs != (connState{State: connConnected, Session: sessionIDHex(tc.s.ID())}) {
		t.Fatalf("second event %q, want the connection's state (connected, session 0x%x)", e, tc.s.ID())
	}
	if _, err := tc.s.Set(context.Background(), path+"/a", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	e := next(time.Second)
	var changes []changeEvent
	if !strings.HasPrefix(e, "change ") || json.Unmarshal([]byte(e[7:]), &changes) != nil ||
		len(changes) != 1 || changes[0] != (changeEvent{Type: "changed", Path: path + "/a"}) {
		t.Fatalf("after a set: %q", e)
	}
}

// TestCompletion: zkr completion writes a shell's completion script, and
// the script's helper completes zkr's commands (console among them).
func TestCompletion(t *testing.T) {
	r := zkr(t, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_zkr") {
		t.Fatalf("completion bash: exit %d, stderr %q, stdout starts %.80q", r.code, r.stderr, r.stdout)
	}
	r = zkr(t, "__complete", "cons")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "console\t") {
		t.Errorf("completing \"cons\": exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestConsoleCommandRenews: zkr console, the command, outlives its
// session: cut off (a fault proxy refusing it) until the server expired
// the session, it makes a new one once it can connect again, and serves
// on it.
func TestConsoleCommandRenews(t *testing.T) {
	addr := servers(t)
	proxy := zktest.NewProxyT(t, addr)
	t.Cleanup(func() { proxy.Refuse(false) })
	p := start(t, nil, "--servers", proxy.Addr(), "--session-timeout", "4s", "console", "--addr", "127.0.0.1:0")
	var base string
	p.waitOutput(10*time.Second, "the console's address", func(out string) bool {
		_, rest, ok := strings.Cut(out, "serving ")
		base, _, _ = strings.Cut(rest, " ")
		return ok && strings.HasSuffix(base, "/")
	})
	type info struct {
		Session string    `json:"session"`
		Conn    connState `json:"conn"`
	}
	get := func(path string) (int, info) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var in info
		json.NewDecoder(res.Body).Decode(&in)
		return res.StatusCode, in
	}
	_, first := get("api/info")
	if first.Conn.State != connConnected || first.Session == "" {
		t.Fatalf("before the cut: %+v", first)
	}

	proxy.Refuse(true)
	proxy.Cut()
	ctx := context.Background()
	eventually(t, 30*time.Second, "the server expiring the console's session", func() bool {
		d, err := zkadmin.Dump(ctx, addr)
		if err != nil {
			return false
		}
		for _, id := range d.Sessions {
			if sessionIDHex(id) == first.Session {
				return false
			}
		}
		return true
	})
	if _, in := get("api/info"); in.Conn.State != connDisconnected {
		t.Errorf("cut off: the console tells %+v, want disconnected", in.Conn)
	}
	proxy.Refuse(false)
	var now info
	eventually(t, 10*time.Second, "a new session", func() bool {
		_, now = get("api/info")
		return now.Conn.State == connConnected && now.Session != first.Session
	})
	if now.Conn.Renewals != 1 || now.Conn.Session != now.Session {
		t.Errorf("after the renewal: %+v", now)
	}
	if code, _ := get("api/children?path=/"); code != http.StatusOK {
		t.Errorf("listing / on the new session: status %d", code)
	}
	if p.exited() || !strings.Contains(p.stderr.String(), "new session "+now.Session) {
		t.Errorf("zkr console: exited %v; stderr %q", p.exited(), p.stderr.String())
	}
}
