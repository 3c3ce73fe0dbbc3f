package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// chromiumPath is Debian's chromium (apt-get install -y chromium). The
// tests never download a browser.
const chromiumPath = "/usr/bin/chromium"

// shotsEnv names a directory where the browser tests write a screenshot
// of each view.
const shotsEnv = "ZKR_CONSOLE_SHOTS"

// browser is one headless Chromium for the package's run, started by the
// first test that needs it and stopped by TestMain.
var browser struct {
	once   sync.Once
	ctx    context.Context // the browser's: a tab is chromedp.NewContext(ctx)
	stop   func()
	err    error
	tmpDir string
}

// startBrowser starts Chromium with a fresh profile and every background
// connection turned off (the machine refuses outside connections; without
// these flags Chromium keeps trying them).
func startBrowser() {
	if _, err := os.Stat(chromiumPath); err != nil {
		browser.err = zktest.Unavailable(fmt.Errorf("no %s (apt-get install -y chromium): %w", chromiumPath, err))
		return
	}
	dir, err := os.MkdirTemp("", "zkr-chromium-")
	if err != nil {
		browser.err = err
		return
	}
	browser.tmpDir = dir
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// The first Do starts the browser, which lives as long as that
	// call's context: no timeout on it.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		browser.err = fmt.Errorf("starting %s: %w", chromiumPath, err)
		return
	}
	browser.ctx = bctx
	browser.stop = func() {
		cancelBrowser()
		cancelAlloc()
	}
}

// stopBrowser stops the browser if a test started it; TestMain calls it.
func stopBrowser() {
	if browser.stop != nil {
		browser.stop()
	}
	if browser.tmpDir != "" {
		os.RemoveAll(browser.tmpDir)
	}
}

// tab is a browser tab of the test's own, with the page's errors.
type tab struct {
	t   *testing.T
	ctx context.Context

	// close closes the tab and fails the test on the errors the page
	// reported. A test defers it: a clean-up that deletes the nodes the
	// page shows must not run while the page is open, for the page then
	// asks for them and the browser logs the 404s.
	close func()

	mu      sync.Mutex
	errors  []string
	allowed []string // substrings of the errors the test expects
}

// allow makes the errors the browser logs that contain one of subs
// expected (a failed load's status, say), not failures.
func (tb *tab) allow(subs ...string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, subs...)
}

// newTab opens a tab, skipping the test when Chromium is not installed
// (failing it when CI is set). Every uncaught exception, console.error
// and error the browser logs for the page (a rule of the
// Content-Security-Policy refused, a failed load) is recorded; the test
// fails on any.
func newTab(t *testing.T) *tab {
	t.Helper()
	browser.once.Do(startBrowser)
	zktest.SkipOrFail(t, browser.err)
	ctx, cancel := chromedp.NewContext(browser.ctx)
	tb := &tab{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				tb.mu.Lock()
				tb.errors = append(tb.errors, m.String()+" at "+m.URL)
				tb.mu.Unlock()
			}
		}
	}()
	tb.close = sync.OnceFunc(func() {
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
	next:
		for _, e := range tb.errors {
			for _, a := range tb.allowed {
				if strings.Contains(e, a) {
					continue next
				}
			}
			t.Errorf("the page reported an error: %s", e)
		}
	})
	t.Cleanup(tb.close)
	return tb
}

// do runs actions in the tab, bounded.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, zktest.Bound(10*time.Second))
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression that gives a string.
func (tb *tab) eval(js string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, zktest.Bound(10*time.Second))
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		tb.t.Fatal(err)
	}
	return v
}

// waitJS polls the JavaScript expression js (a string) until it equals
// want, for at most zktest.Bound(d), and returns how long that took.
func (tb *tab) waitJS(d time.Duration, what, js, want string) time.Duration {
	tb.t.Helper()
	start := time.Now()
	bound := zktest.Bound(d)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, bound)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		cancel()
		if err == nil && got == want {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			tb.t.Fatalf("%s: not within %v: the page shows %q, want %q (err %v)", what, bound, got, want, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll's period, not a wait for readiness
	}
}

// click clicks the element sel selects, in one step of the page's own
// (the tree draws its rows again as the listing changes, so a node found
// by one protocol call may be gone by the next).
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.waitJS(10*time.Second, "clicking "+sel, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); if (!e) return "absent"; e.click(); return "clicked"; })()`, "clicked")
}

// expand clicks the toggle of the tree's row for path once, and waits
// until the row for child shows; if it does not, the failure says what
// rows the tree shows and the page's message.
func (tb *tab) expand(path, child string) {
	tb.t.Helper()
	tb.waitJS(10*time.Second, path+" expanded", `(() => {
		if (document.querySelector('#tree .row[data-path="`+child+`"]')) return "true";
		const t = document.querySelector('#tree .row[data-path="`+path+`"] .tog');
		const seen = [...document.querySelectorAll("#tree .row")].map((r) => r.dataset.path + "[" + (r.querySelector(".tog") || {}).textContent + "]").join(" ");
		const why = "rows: " + seen + "; message: " + document.getElementById("msg").textContent;
		if (!t) return why;
		if (!window.__clicked) { window.__clicked = true; t.click(); }
		return why;
	})()`, "true")
}

// shot writes a screenshot of the page as name.png into $ZKR_CONSOLE_SHOTS,
// if set.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	dir := os.Getenv(shotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, zktest.Bound(10*time.Second))
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// chainJS is what the recipes view shows of the line at path, one
// "state:node<-watched" per contender.
func chainJS(path string) string {
	return `(() => {
  const line = [...document.querySelectorAll("#recipes .line")].find((l) => l.dataset.path === ` + strconv.Quote(path) + `);
  if (!line) return "none";
  return [...line.querySelectorAll("li")].map((li) => li.dataset.state + ":" + li.dataset.node + "<-" + li.dataset.waitsFor).join(" ");
})()`
}

// chain is the text chainJS gives for nodes in line: the first holds, each
// other waits for the one before it.
func chain(nodes []string) string {
	var parts []string
	for i, n := range nodes {
		if i == 0 {
			parts = append(parts, "holds:"+n+"<-")
		} else {
			parts = append(parts, "waits:"+n+"<-"+nodes[i-1])
		}
	}
	return strings.Join(parts, " ")
}

// TestConsoleBrowser drives the page in headless Chromium against real
// ZooKeeper: it loads with no error; a lock with a holder and three
// waiters shows as a chain; a waiter leaving and the holder releasing each
// reach the page within a second; the tree, the data views and the
// ensemble view show; node data and a node name made of HTML and script
// stay text.
func TestConsoleBrowser(t *testing.T) {
	addr := servers(t)
	tc := newTestConsole(t, consoleOptions{AllowWrites: true})
	tb := newTab(t)
	defer tb.close()
	base := testPath(t, "app")
	lockPath := base + "/locks/report"
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	mkNode(t, tc.s, base+"/config/app.json", `{"replicas": 3, "owner": "team-a", "limits": {"cpu": "2", "memory": "4Gi"}}`)

	// A holder and three waiters, each on a session of its own.
	type contender struct {
		s      *zkrecipes.Session
		m      *zkrecipes.Mutex
		cancel context.CancelFunc
		done   chan error
	}
	var cs []*contender
	for i := range 4 {
		s, err := zkrecipes.NewSession(ctx, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		id := "holder"
		if i > 0 {
			id = "waiter-" + strconv.Itoa(i)
		}
		c := &contender{s: s, m: zkrecipes.NewMutex(s, lockPath, zkrecipes.WithNodeData([]byte(id))), done: make(chan error, 1)}
		lctx, lcancel := context.WithCancel(context.Background())
		c.cancel = lcancel
		t.Cleanup(lcancel)
		go func() { c.done <- c.m.Lock(lctx) }()
		if i == 0 {
			if err := <-c.done; err != nil {
				t.Fatal(err)
			}
		}
		cs = append(cs, c)
		// In line before the next one queues, so that the order is known.
		eventually(t, 10*time.Second, "contender "+id+" in line", func() bool {
			kids, _, _ := tc.s.Children(ctx, lockPath)
			return len(kids) == i+1
		})
	}
	kids, _, err := tc.s.Children(ctx, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	nodes := sortBySeq(kids)

	u := tc.srv.URL + "/?view=recipes&path=" + url.QueryEscape(base)
	tb.do(chromedp.Navigate(u))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.waitJS(10*time.Second, "the chain of four", chainJS(lockPath), chain(nodes))
	ids := tb.eval(`[...document.querySelectorAll("#recipes .cid")].map((e) => e.textContent).join(",")`)
	if ids != "holder,waiter-1,waiter-2,waiter-3" {
		t.Errorf("the waiters' ids on the page: %q", ids)
	}
	tb.shot("recipes-lock-chain")

	// The second waiter leaves: the third now watches the first.
	cs[2].cancel()
	if err := <-cs[2].done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leaving waiter's Lock: %v", err)
	}
	took := tb.waitJS(time.Second, "a waiter leaving", chainJS(lockPath), chain([]string{nodes[0], nodes[1], nodes[3]}))
	t.Logf("a waiter leaving reached the page in %v", took)

	// The holder releases: the first waiter holds.
	if err := cs[0].m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	took = tb.waitJS(time.Second, "the holder releasing", chainJS(lockPath), chain([]string{nodes[1], nodes[3]}))
	t.Logf("the holder releasing reached the page in %v", took)
	if err := <-cs[1].done; err != nil {
		t.Fatalf("the first waiter's Lock: %v", err)
	}
	// The last waiter's session expires: its node goes with it.
	id, pw := cs[3].s.Credentials()
	if err := zktest.ExpireSession(ctx, addr, id, pw); err != nil {
		t.Fatal(err)
	}
	took = tb.waitJS(time.Second, "a waiter's session expiring", chainJS(lockPath), chain([]string{nodes[1]}))
	t.Logf("a session expiring reached the page in %v", took)
	tb.shot("recipes-after-release")

	// The tree, and a node's data as JSON and hex.
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(base)))
	tb.waitJS(10*time.Second, "the tree's first level", `[...document.querySelectorAll("#tree .row")].map((r) => r.dataset.path).join(" ")`,
		base+" "+base+"/config "+base+"/locks")
	tb.expand(base+"/config", base+"/config/app.json")
	tb.click(`#tree .row[data-path="` + base + `/config/app.json"]`)
	tb.waitJS(10*time.Second, "the node's data", `(document.querySelector("#details h2")||{}).textContent`, base+"/config/app.json")
	tb.click(`#details .dtabs button:nth-child(2)`) // JSON (the pane is drawn again on each change: found and clicked in one step)
	tb.waitJS(10*time.Second, "the data as JSON", `document.getElementById("nodedata").textContent.split("\n")[1]`, `  "replicas": 3,`)
	tb.shot("tree-json")
	tb.click(`#details .dtabs button:nth-child(3)`) // Hex
	tb.waitJS(10*time.Second, "the data as hex", `document.getElementById("nodedata").textContent.slice(0, 20)`, "00000000  7b 22 72 6")
	tb.shot("tree-hex")

	// A write from the page: the token comes in the address's fragment,
	// which the page takes out of the address bar.
	cfg := base + "/config/app.json"
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(cfg) + "#token=" + tc.opts.Token))
	tb.waitJS(10*time.Second, "the node to change", `(document.querySelector("#details h2")||{}).textContent`, cfg)
	if h := tb.eval(`location.hash`); h != "" {
		t.Errorf("the token stays in the address bar: %q", h)
	}
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.eval(`(() => { document.getElementById("setdata").value = '{"replicas": 5}'; return ""; })()`)
	tb.click("#setbtn")
	eventually(t, 10*time.Second, "the page's write", func() bool { return nodeData(t, tc.s, cfg) == `{"replicas": 5}` })
	tb.waitJS(10*time.Second, "the written data on the page", `document.getElementById("nodedata").textContent`, `{"replicas": 5}`)

	// The ensemble.
	tb.do(chromedp.Navigate(tc.srv.URL + "/?view=health&path=" + url.QueryEscape(base)))
	tb.waitJS(10*time.Second, "the ensemble view", `[...document.querySelectorAll("#members tbody tr td:nth-child(2)")].map((e) => e.textContent).join(",")`, "standalone")
	tb.shot("ensemble")
}

// aclJS is the ACL the details pane shows, one "scheme:id:perms" per row,
// joined by spaces, then the Set ACL button's text.
const aclJS = `[...document.querySelectorAll("#acl tr")].slice(1).map((r) => [...r.cells].map((c) => c.textContent).join(":")).join(" ") + " | " + (document.getElementById("aclbtn") || {}).textContent`

// TestConsoleBrowserACL: with --allow-writes, the details pane's ACL
// editor, prefilled with the node's ACL (an id made of HTML shown as
// text), sets the ACL the user typed, and the pane then shows the new one;
// a bad entry is refused, named in the message bar, and so is a change
// made from the ACL version read before another client changed it: the
// server's ACL stays as it was.
func TestConsoleBrowserACL(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{AllowWrites: true})
	tb := newTab(t)
	defer tb.close()
	tb.allow("status of 400 (Bad Request) at "+tc.srv.URL+"/api/acl", "status of 409 (Conflict) at "+tc.srv.URL+"/api/acl")
	path := testPath(t, "acl") + "/cfg"
	mkNode(t, tc.s, path, "v1")
	adm := admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	evil := `<img src=x onerror=window.__pwned=1>:hash`
	if _, err := adm.SetACL(ctx, path, []zkclient.ACL{{Perms: zkclient.PermAll, Scheme: "world", ID: "anyone"}, {Perms: zkclient.PermRead, Scheme: "digest", ID: evil}}, 0); err != nil {
		t.Fatal(err)
	}
	aclOf := func() string { // the server's
		acl, st, err := adm.GetACL(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		var es []string
		for _, e := range viewACL(acl) {
			es = append(es, e.String())
		}
		return strings.Join(es, " ") + " @" + strconv.Itoa(int(st.Aversion))
	}

	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(path) + "#token=" + tc.opts.Token))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.waitJS(10*time.Second, "the node's ACL", aclJS, "world:anyone:cdrwa digest:"+evil+":r | Set ACL (ACL version 1)")
	if got := tb.eval(`document.getElementById("setacl").value`); got != "world:anyone:cdrwa\ndigest:"+evil+":r" {
		t.Errorf("the ACL editor starts with %q", got)
	}
	if p := tb.eval(`String(window.__pwned)`); p != "undefined" {
		t.Errorf("an ACL id made of HTML ran as such: window.__pwned = %s", p)
	}

	digest := zkclient.DigestACL(zkclient.PermAll, "bob", "pw")[0].ID
	setACL := func(text string) {
		t.Helper()
		tb.eval(`(() => { document.getElementById("setacl").value = ` + strconv.Quote(text) + `; return ""; })()`)
		tb.click("#aclbtn")
	}
	setACL("world:anyone:rwa\n  digest:" + digest + ":r\n\n")
	tb.waitJS(10*time.Second, "the new ACL on the page", aclJS, "world:anyone:rwa digest:"+digest+":r | Set ACL (ACL version 2)")
	if got, want := aclOf(), "world:anyone:rwa digest:"+digest+":r @2"; got != want {
		t.Fatalf("the server's ACL after Set: %s, want %s", got, want)
	}
	tb.eval(`(() => { document.getElementById("aclbtn").scrollIntoView({ block: "end" }); return ""; })()`)
	tb.shot("acl-edit")

	setACL("world:anyone:rwa\nworld:anyone:rx")
	tb.waitJS(10*time.Second, "the bad entry refused, named", `document.getElementById("msg").textContent.startsWith('ACL entry "world:anyone:rx": ') + " " + document.getElementById("aclbtn").textContent`,
		"true Set ACL (ACL version 2)")
	if got, want := aclOf(), "world:anyone:rwa digest:"+digest+":r @2"; got != want {
		t.Fatalf("after the bad entry, the server's ACL: %s, want %s", got, want)
	}

	// Again, long after the page's first reads: the pane is drawn again
	// by the Set itself (a new ACL fires no watch), with the message
	// cleared.
	setACL("world:anyone:cdrwa")
	tb.waitJS(10*time.Second, "the second ACL on the page", aclJS+` + " | " + document.getElementById("msg").textContent`,
		"world:anyone:cdrwa | Set ACL (ACL version 3) | ")
	if got, want := aclOf(), "world:anyone:cdrwa @3"; got != want {
		t.Fatalf("the server's ACL after the second Set: %s, want %s", got, want)
	}

	// Another client changes the ACL: the page, which read version 3,
	// is refused.
	if _, err := adm.SetACL(ctx, path, zkclient.WorldACL(zkclient.PermRead|zkclient.PermAdmin), 3); err != nil {
		t.Fatal(err)
	}
	setACL("world:anyone:r")
	tb.waitJS(10*time.Second, "the stale version refused",
		`String(/changed since it was read \(it is no longer at ACL version 3\)/.test(document.getElementById("msg").textContent))`, "true")
	if got, want := aclOf(), "world:anyone:ra @4"; got != want {
		t.Errorf("after the refused Set, the server's ACL: %s, want %s", got, want)
	}
}

// TestConsoleBrowserXSS: node data, a contender's id and a node name
// made of HTML and script are shown as text, in the details, the tree and
// the recipes view; no script of theirs runs.
func TestConsoleBrowserXSS(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{})
	tb := newTab(t)
	defer tb.close()
	base := testPath(t, "xss")
	payload := `<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned='img'"><b id="bold">bold</b>`
	id := `<img src=x onerror="window.__pwned=2">`
	// A node name may hold anything but a slash: one made of HTML.
	evilName := `<img src=x onerror=window.__pwned=1>`
	mkNode(t, tc.s, base+"/data", payload)
	mkNode(t, tc.s, base+"/lock/"+evilName, payload)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	m := zkrecipes.NewMutex(tc.s, base+"/lock", zkrecipes.WithNodeData([]byte(id)))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unlock(context.Background()) })

	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(base+"/data")))
	tb.waitJS(10*time.Second, "the data as text", `(document.getElementById("nodedata")||{}).textContent`, payload)
	tb.shot("xss-data-inert")
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(base+"/lock")))
	tb.waitJS(10*time.Second, "the name as text in the tree",
		`String([...document.querySelectorAll("#tree .row")].some((r) => r.textContent === `+strconv.Quote(evilName)+`))`, "true")
	tb.do(chromedp.Click(`//nav/button[text()="Recipes"]`))
	tb.waitJS(10*time.Second, "the id as text in the recipes view",
		`[...document.querySelectorAll("#recipes .cid")].map((e) => e.textContent).join("|")`, id)
	note := tb.eval(`document.querySelector("#recipes .line .note").textContent`)
	if !strings.HasSuffix(note, "other children: "+evilName) {
		t.Errorf("the recipes view's note: %q", note)
	}
	tb.shot("xss-recipes-inert")
	pwned := tb.eval(`String(window.__pwned) + "," + document.querySelectorAll("#bold, main img, main script").length`)
	if pwned != "undefined,0" {
		t.Errorf("the page ran or made what node data or names hold: window.__pwned, elements = %s", pwned)
	}
}

// TestConsoleBrowserOrphan: a contender whose session is connected to no
// server (its client cut off, the session not yet expired) is flagged.
func TestConsoleBrowserOrphan(t *testing.T) {
	addr := servers(t)
	tc := newTestConsole(t, consoleOptions{})
	tb := newTab(t)
	defer tb.close()
	proxy := zktest.NewProxyT(t, addr)
	lockPath := testPath(t, "lock")
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{proxy.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Refuse(false)
		s.Close()
		tc.s.DeleteTree(context.Background(), lockPath)
	})
	if err := zkrecipes.NewMutex(s, lockPath, zkrecipes.WithNodeData([]byte("cut-off"))).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Refuse(true)
	proxy.Cut()
	tb.do(chromedp.Navigate(tc.srv.URL + "/?view=recipes&path=" + url.QueryEscape(lockPath)))
	tb.waitJS(10*time.Second, "the orphan flagged",
		`[...document.querySelectorAll("#recipes li")].map((li) => li.dataset.state + (li.dataset.orphan ? " orphan" : "")).join(",")`, "holds orphan")
	tb.shot("recipes-orphan")
}

// sortBySeq sorts sequential node names by their sequence number.
func sortBySeq(names []string) []string {
	out := append([]string{}, names...)
	seq := func(n string) int { v, _ := strconv.Atoi(n[len(n)-10:]); return v }
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if seq(out[j]) < seq(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestConsoleBrowserBigTree: a node of 100,000 children stays usable: the
// page holds only the rows in view, scrolls to the last child and to the
// middle, and the server-side filter narrows the listing.
//
// Making and deleting 100,000 nodes takes ZooKeeper tens of seconds, more
// than the suite's budget: the test runs only with ZKR_CONSOLE_BIG=1.
func TestConsoleBrowserBigTree(t *testing.T) {
	if os.Getenv("ZKR_CONSOLE_BIG") != "1" {
		t.Skip("100,000 nodes: set ZKR_CONSOLE_BIG=1 to run")
	}
	const n = 100_000
	tc := newTestConsole(t, consoleOptions{})
	tb := newTab(t)
	defer tb.close()
	base := testPath(t, "big")
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	mkNode(t, tc.s, base, "")
	start := time.Now()
	t.Cleanup(func() { // before mkNode's: the children, in transactions
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
		defer cancel()
		inBatches(ctx, t, tc.s, n, func(j int) zkclient.Op { return tc.s.Client().DeleteOp(fmt.Sprintf("%s/n%05d", base, j), -1) })
		t.Logf("%d children deleted in %v", n, time.Since(start))
	})
	acl := zkclient.WorldACL(zkclient.PermAll)
	inBatches(ctx, t, tc.s, n, func(j int) zkclient.Op {
		return tc.s.Client().CreateOp(fmt.Sprintf("%s/n%05d", base, j), nil, zkclient.Persistent, acl)
	})
	t.Logf("%d children made in %v", n, time.Since(start))

	start = time.Now()
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(base)))
	tb.waitJS(20*time.Second, "the count", `document.getElementById("treecount").textContent`, "100,000 children")
	rows := tb.eval(`String(document.querySelectorAll("#tree .row").length)`)
	if r, _ := strconv.Atoi(rows); r == 0 || r > 100 {
		t.Errorf("%s rows in the document, want the ones in view only", rows)
	}
	tb.shot("tree-100k")
	lastRow := `(() => { const r = [...document.querySelectorAll("#tree .row:not(.loading)")].map((e) => e.dataset.path); return r[r.length - 1] || ""; })()`
	tb.eval(`(() => { const e = document.getElementById("tree"); e.scrollTop = e.scrollHeight; return ""; })()`)
	tb.waitJS(20*time.Second, "the last child after scrolling to the end", lastRow, base+"/n99999")
	tb.eval(`(() => { const e = document.getElementById("tree"); e.scrollTop = 50000 * 22; return ""; })()`)
	tb.waitJS(20*time.Second, "the middle after scrolling to it",
		`String([...document.querySelectorAll("#tree .row")].some((r) => r.dataset.path === `+strconv.Quote(base+"/n50000")+`))`, "true")
	tb.shot("tree-100k-middle")
	tb.do(chromedp.SendKeys(chromedp.CSS("#filter"), "n9999"))
	tb.waitJS(20*time.Second, "the filter", `document.getElementById("treecount").textContent`, "10 of 100,000 children")
	tb.shot("tree-100k-filtered")
	t.Logf("the page's part took %v", time.Since(start))
}

// inBatches runs op(0) to op(n-1) in transactions of 1,000, four at a
// time.
func inBatches(ctx context.Context, t *testing.T, s *zkrecipes.Session, n int, op func(int) zkclient.Op) {
	t.Helper()
	const batch = 1000
	sem := make(chan struct{}, 4)
	errs := make(chan error, n/batch+1)
	var wg sync.WaitGroup
	for i := 0; i < n; i += batch {
		ops := make([]zkclient.Op, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			ops = append(ops, op(j))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := s.Multi(ctx, ops...); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a transaction of %d: %v", batch, err)
	}
}

// watchLive makes the page record every state its header's live badge
// shows, from now on, in window.__live (a MutationObserver: no state is
// missed however briefly shown); liveSeen returns them, joined by spaces.
func (tb *tab) watchLive() {
	tb.t.Helper()
	tb.eval(`(() => {
		window.__live = [document.getElementById("live").dataset.state];
		new MutationObserver(() => {
			const s = document.getElementById("live").dataset.state;
			if (window.__live[window.__live.length - 1] !== s) window.__live.push(s);
		}).observe(document.getElementById("live"), { attributes: true, attributeFilter: ["data-state"] });
		return "";
	})()`)
}

func (tb *tab) liveSeen() string {
	tb.t.Helper()
	return tb.eval(`window.__live.join(" ")`)
}

// treeRowsJS is the paths of the tree's rows, joined by spaces.
const treeRowsJS = `[...document.querySelectorAll("#tree .row")].map((r) => r.dataset.path).join(" ")`

// TestConsoleBrowserReconnect: the console outlives its ZooKeeper
// connection and its session. When its connection is cut (a fault proxy
// refusing it), the page says it is disconnected, and once it is back, it
// shows what changed meanwhile, a node it had open and found deleted (404)
// taken out of the tree, not retried; when its session expires, the page
// says so while the console makes a new session, retries a listing that
// fails meanwhile (503) and says so, then, on the new session, shows what
// changed meanwhile and follows the subtree as before; the page's event
// stream stays up throughout.
func TestConsoleBrowserReconnect(t *testing.T) {
	addr := servers(t)
	proxy := zktest.NewProxyT(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(60*time.Second))
	defer cancel()
	connect := func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, []string{proxy.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(30*time.Second)))
	}
	first, err := connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The console's renewals wait for the test's word, so that the page
	// can be seen between the expiry and the new session.
	renew := make(chan struct{})
	renewals := make(chan *zkrecipes.Session, 4)
	tc := newTestConsoleOn(t, first, consoleOptions{NewSession: func(ctx context.Context) (*zkrecipes.Session, error) {
		select {
		case <-renew:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s, err := connect(ctx)
		if err == nil {
			renewals <- s
		}
		return s, err
	}})
	t.Cleanup(func() { proxy.Refuse(false) })

	// The test's own writer, on the server directly.
	w, err := zkrecipes.NewSession(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	base := testPath(t, "live")
	mkNode(t, w, base+"/a/x", "1")

	tb := newTab(t)
	defer tb.close()
	// The listings that fail on purpose below.
	// A read that races the console's expiry (sent before the page
	// learns of it) is answered 503 too: the page reads again once the
	// console is back.
	tb.allow("status of 404 (Not Found) at "+tc.srv.URL+"/api/children?", "status of 503 (Service Unavailable) at "+tc.srv.URL+"/api/children?",
		"status of 503 (Service Unavailable) at "+tc.srv.URL+"/api/node?")
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(base)))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.expand(base+"/a", base+"/a/x")
	tb.watchLive()

	// A plain disconnection: the session lives on.
	proxy.Refuse(true)
	proxy.Cut()
	tb.waitJS(10*time.Second, "the page telling the disconnection", `document.getElementById("live").dataset.state`, "disconnected")
	tb.shot("disconnected")
	if err := w.DeleteTree(ctx, base+"/a"); err != nil {
		t.Fatal(err)
	}
	mkNode(t, w, base+"/b/y", "")
	proxy.Refuse(false)
	tb.waitJS(10*time.Second, "the page after the reconnection", `document.getElementById("live").dataset.state`, "live")
	tb.waitJS(10*time.Second, "the changes made while disconnected", treeRowsJS, base+" "+base+"/b")
	if msg := tb.eval(`document.getElementById("msg").textContent`); msg != "" {
		t.Errorf("after the open node was found deleted, the page says %q", msg)
	}
	if s := tc.session(); s != first {
		t.Fatal("the console changed sessions on a mere disconnection")
	}

	// The session expires.
	id, pw := first.Credentials()
	if err := zktest.ExpireSession(ctx, addr, id, pw); err != nil {
		t.Fatal(err)
	}
	tb.waitJS(10*time.Second, "the page telling the expiry", `document.getElementById("live").dataset.state`, "expired")
	tb.shot("expired")
	// Opening a node now fails (the console has no session): the page
	// retries. (A reread of the shown root that raced the expiry may be
	// retrying already, its rows gone until it is answered: that is the
	// same behaviour.)
	tb.waitJS(10*time.Second, "the page retrying a listing", `(() => {
		const m = document.getElementById("msg").textContent;
		const r = /^listing (\S+) failed: .*; retrying in [0-9.]+ s \(attempt [0-9]+\)$/.exec(m);
		if (r && (r[1] === `+strconv.Quote(base)+` || r[1] === `+strconv.Quote(base+"/b")+`)) return "retrying";
		const tog = document.querySelector('#tree .row[data-path="`+base+`/b"] .tog');
		if (tog && !window.__openedB) { window.__openedB = true; tog.click(); }
		return "not yet; message: " + m;
	})()`, "retrying")
	tb.shot("retrying")
	mkNode(t, w, base+"/c", "")
	close(renew)
	var next *zkrecipes.Session
	select {
	case next = <-renewals:
	case <-time.After(zktest.Bound(10 * time.Second)):
		t.Fatal("the console made no new session")
	}
	tb.waitJS(10*time.Second, "the page on the new session", `document.getElementById("live").dataset.state + " " + document.getElementById("live").dataset.session`,
		"live "+sessionIDHex(next.ID()))
	tb.waitJS(10*time.Second, "the retried listing and a node made while expired", `(() => {
		// b, if it could not be opened while the root's listing was
		// retried, is opened now.
		const tog = document.querySelector('#tree .row[data-path="`+base+`/b"] .tog');
		if (tog && !window.__openedB) { window.__openedB = true; tog.click(); }
		return `+treeRowsJS+` + " | " + document.getElementById("msg").textContent;
	})()`, base+" "+base+"/b "+base+"/b/y "+base+"/c | ")
	// The subtree is followed on the new session.
	mkNode(t, w, base+"/d", "")
	took := tb.waitJS(time.Second, "a node made on the new session", treeRowsJS, base+" "+base+"/b "+base+"/b/y "+base+"/c "+base+"/d")
	t.Logf("a change after the renewal reached the page in %v", took)
	// The expiry's takeover disconnects the console before it learns
	// that its session expired.
	if seen := tb.liveSeen(); !regexp.MustCompile(`^live disconnected live (disconnected )?expired live$`).MatchString(seen) {
		t.Errorf("the page showed %q, want live disconnected live [disconnected] expired live (the event stream up throughout)", seen)
	}
}

// recipeJS is what the recipes view shows of the recipe at path: its
// summary, then one "state:kind:id[:taken by]" per entry.
func recipeJS(path string) string {
	return `(() => {
  const line = [...document.querySelectorAll("#recipes .line")].find((l) => l.dataset.path === ` + strconv.Quote(path) + `);
  if (!line) return "none";
  return line.querySelector("h3 .kind").textContent + " | " + [...line.querySelectorAll("li")].map((li) =>
    [li.dataset.state, li.dataset.kind, (li.querySelector(".cid") || {}).textContent || ""].concat(li.querySelector(".taker") ? [li.querySelector(".taker").textContent] : []).join(":")).join(" ");
})()`
}

// TestConsoleBrowserRecipes: the recipes view shows, live, the recipes
// that are not lines of contenders, made on real ZooKeeper by the
// library's recipes: a semaphore, a work queue, a locking queue, a group,
// a service's instances and a double barrier, as zkr inspect does.
func TestConsoleBrowserRecipes(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{})
	base := testPath(t, "recipes")
	want := recipeFixture(t, base)
	tb := newTab(t)
	defer tb.close()
	tb.do(chromedp.Navigate(tc.srv.URL + "/?view=recipes&path=" + url.QueryEscape(base)))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	for _, w := range want {
		tb.waitJS(10*time.Second, w.Recipe+" at "+w.Path, recipeJS(w.Path), w.Summary+" | "+w.Entries)
	}
	if n := tb.eval(`String(document.querySelectorAll("#recipes .line").length)`); n != strconv.Itoa(len(want)) {
		t.Errorf("the recipes view shows %s recipes, want %d (a recipe's own nodes are not recipes)", n, len(want))
	}
	tb.shot("recipes-others")

	// Live: an item offered reaches the page.
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if err := zkrecipes.NewQueue(tc.s, base+"/queue").Offer(ctx, []byte("job-4")); err != nil {
		t.Fatal(err)
	}
	took := tb.waitJS(time.Second, "an item offered", recipeJS(base+"/queue"), "queue, 4 items | queued:item:job-1 queued:item:job-2 queued:item:job-3 queued:item:job-4")
	t.Logf("an item offered reached the page in %v", took)
}

// TestConsoleBrowserLayouts: the recipes view labels a contender named as
// Curator names it (a zkr Mutex) and one named as kazoo does.
func TestConsoleBrowserLayouts(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{})
	path := testPath(t, "lock")
	layoutFixture(t, path)
	tb := newTab(t)
	defer tb.close()
	tb.do(chromedp.Navigate(tc.srv.URL + "/?view=recipes&path=" + url.QueryEscape(path)))
	tb.waitJS(10*time.Second, "the contenders' layouts",
		`[...document.querySelectorAll("#recipes li")].map((li) => li.dataset.layout + "=" + li.querySelector(".layout").textContent).join(", ")`,
		"curator=Curator's layout (Curator, zkr), kazoo=kazoo's layout")
	tb.shot("recipes-layouts")
}

// TestConsoleBrowserMissingRoot: a subtree whose root does not exist is
// shown as such (its listing's 404 is not an error to retry), and shown
// once it is created.
func TestConsoleBrowserMissingRoot(t *testing.T) {
	tc := newTestConsole(t, consoleOptions{})
	root := testPath(t, "later")
	tb := newTab(t)
	defer tb.close()
	tb.allow("status of 404 (Not Found) at " + tc.srv.URL + "/api/")
	tb.do(chromedp.Navigate(tc.srv.URL + "/?path=" + url.QueryEscape(root)))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.waitJS(10*time.Second, "the root said missing", `document.getElementById("msg").textContent`, root+" does not exist")
	mkNode(t, tc.s, root+"/child", "")
	tb.waitJS(10*time.Second, "the root, once created", treeRowsJS+` + " | " + document.getElementById("msg").textContent`, root+" "+root+"/child | ")
}

// TestConsoleBrowserNoAnswer: while the console does not answer at all
// (its HTTP server stopped), the page says its stream is down and retries
// a listing that failed, saying so; once the console answers again on its
// address, the page shows the listing and is live again, by itself.
func TestConsoleBrowserNoAnswer(t *testing.T) {
	addr := servers(t)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	c := newConsole(s, consoleOptions{Servers: []string{addr}, Token: newToken()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c}
	go srv.Serve(ln)
	var srv2 *http.Server
	t.Cleanup(func() {
		srv.Close()
		if srv2 != nil {
			srv2.Close()
		}
		c.Close()
		s.Close()
	})
	base := testPath(t, "tree")
	mkNode(t, s, base+"/a", "")
	url0 := "http://" + ln.Addr().String()

	tb := newTab(t)
	defer tb.close()
	tb.allow("net::ERR_") // the requests the stopped console does not answer
	tb.do(chromedp.Navigate(url0 + "/?path=" + url.QueryEscape(base)))
	tb.waitJS(10*time.Second, "the event stream", `document.getElementById("live").dataset.state`, "live")
	tb.waitJS(10*time.Second, "the tree", treeRowsJS, base+" "+base+"/a")

	srv.Close() // the listener and every connection, the event stream's too
	tb.waitJS(10*time.Second, "the page telling its stream down", `document.getElementById("live").dataset.state`, "down")
	// Filtering the root's children reads its listing again, which fails.
	tb.do(chromedp.SendKeys(chromedp.CSS("#filter"), "a"))
	tb.waitJS(10*time.Second, "the page retrying the listing",
		`/^listing \S+ failed: the console did not answer \(.*\); retrying in [0-9.]+ s \(attempt [0-9]+\)$/.test(document.getElementById("msg").textContent) + " " + document.getElementById("msg").textContent.split(" ")[1]`,
		"true "+base)

	ln2, err := net.Listen("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("listening again on %s: %v", ln.Addr(), err)
	}
	srv2 = &http.Server{Handler: c}
	go srv2.Serve(ln2)
	tb.waitJS(10*time.Second, "the retried listing", treeRowsJS+` + " | " + document.getElementById("treecount").textContent + " | " + document.getElementById("msg").textContent`,
		base+" "+base+"/a | 1 of 1 children | ")
	tb.waitJS(10*time.Second, "the event stream again", `document.getElementById("live").dataset.state`, "live")
}
