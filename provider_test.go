package zkrecipes_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// waitInstances waits until c holds the instances ids (sorted), following
// Changed as a reader should.
func waitInstances(t *testing.T, c *zkrecipes.ServiceCache, want ...string) []zkrecipes.ServiceInstance {
	t.Helper()
	deadline := time.After(zktest.Bound(20 * time.Second))
	for {
		ch := c.Changed()
		got := c.Instances()
		if slices.Equal(ids(got), want) {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("service cache holds %v, want %v", ids(got), want)
		}
	}
}

// TestServiceCache: the copy follows registrations, updates and
// unregistrations over one watch shared by every handle of the session,
// leaves out a node that is not an instance, and removes its watch when
// the last handle closes; a handle's Changed tells each change.
func TestServiceCache(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	base := e.path + "/services"
	s := e.session()
	d := zkrecipes.NewDiscovery(s, base)

	r1, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "a", Address: "127.0.0.1", Port: 1})
	must(t, err, "Register")
	c1, err := d.ServiceCache(ctx, "web")
	must(t, err, "ServiceCache")
	if got := ids(c1.Instances()); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("initial copy %v, want [a]", got)
	}
	c2, err := zkrecipes.NewDiscovery(s, base).ServiceCache(ctx, "web")
	must(t, err, "second ServiceCache")
	// One persistent watch for both handles, one data watch for r1's hold.
	e.waitWatches("one watch for two handles", 2)

	other := zkrecipes.NewDiscovery(e.session(), base)
	r2, err := other.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "b", Address: "127.0.0.1", Port: 2})
	must(t, err, "Register")
	waitInstances(t, c2, "a", "b")
	waitInstances(t, c1, "a", "b")

	// A change costs the shared copy one read of the instance (and an
	// exists of the service's node), no listing; two copies would read
	// twice.
	ch := c1.Changed()
	before := s.Stats()
	up := r2.Instance()
	up.Port = 3
	must(t, r2.Update(ctx, up), "Update")
	closed(t, ch, "Changed after an Update")
	e.waitFor("the update in the copy", func() bool {
		in := c2.Instances()
		return len(in) == 2 && in[1].Port == 3
	})
	if after := s.Stats(); after.Listings != before.Listings || after.Reads-before.Reads > 2 {
		t.Errorf("one update cost %d listings and %d reads, want 0 and at most 2", after.Listings-before.Listings, after.Reads-before.Reads)
	}

	_, err = e.admin.Create(base+"/web/junk", []byte("not json"), zkclient.Persistent, openACL)
	must(t, err, "create junk")
	must(t, r1.Unregister(ctx), "Unregister")
	waitInstances(t, c1, "b")
	must(t, e.admin.Delete(base+"/web/junk", -1), "delete junk")

	c1.Close()
	c1.Close()
	if got := ids(c2.Instances()); !slices.Equal(got, []string{"b"}) {
		t.Errorf("copy after another handle closed: %v", got)
	}
	select {
	case <-c2.Done():
		t.Fatalf("copy stopped with a handle open: %v", c2.Err())
	default:
	}
	c2.Close()
	closed(t, c2.Done(), "Done after the last Close")
	e.waitWatches("no watch but r2's hold", 1)

	// A new handle after the last closed loads a new copy.
	c3, err := d.ServiceCache(ctx, "web")
	must(t, err, "ServiceCache again")
	waitInstances(t, c3, "b")
	e.expire(s)
	closed(t, c3.Done(), "Done after the session expired")
	if err := c3.Err(); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Err after expiry = %v", err)
	}
	c3.Close()

	// Handles asked for at once on a fresh session share one load.
	s2 := e.session()
	before = s2.Stats()
	var wg sync.WaitGroup
	handles := make([]*zkrecipes.ServiceCache, 8)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := zkrecipes.NewDiscovery(s2, base).ServiceCache(ctx, "web")
			if check(t, err, "concurrent ServiceCache") {
				handles[i] = c
			}
		}()
	}
	wg.Wait()
	after := s2.Stats()
	for _, c := range handles {
		if c != nil {
			waitInstances(t, c, "b")
			c.Close()
		}
	}
	// One load: a listing of the service and one of its instance.
	if n := after.Listings - before.Listings; n != 2 {
		t.Errorf("8 handles at once cost %d listings, want 2 (one load)", n)
	}

	must(t, r2.Unregister(ctx), "Unregister")

	if _, err := d.ServiceCache(ctx, "a/b"); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("ServiceCache of a bad name = %v", err)
	}
}

// TestProvider: the strategies (round-robin in turn, sticky while usable,
// random over all), disabled instances and filters left out, and the down
// policy: an instance reported failing Errors times within Window is
// skipped for Timeout.
func TestProvider(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	base := e.path + "/services"
	d := zkrecipes.NewDiscovery(e.session(), base)
	regs := map[string]*zkrecipes.Registration{}
	for i, id := range []string{"a", "b", "c", "d"} {
		r, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "api", ID: id, Address: "127.0.0.1", Port: 1000 + i, Disabled: id == "d"})
		must(t, err, "Register")
		regs[id] = r
	}
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	rr, err := d.Provider(ctx, "api", zkrecipes.WithStrategy(zkrecipes.RoundRobin()), zkrecipes.WithProviderClock(clock),
		zkrecipes.WithDownPolicy(zkrecipes.DownPolicy{Errors: 2, Window: time.Minute, Timeout: 10 * time.Second}))
	must(t, err, "Provider")
	defer rr.Close()
	waitInstances(t, rr.Cache(), "a", "b", "c", "d")
	picks := func(p *zkrecipes.Provider, n int) []string {
		t.Helper()
		var out []string
		for range n {
			in, err := p.Instance()
			must(t, err, "Instance")
			out = append(out, in.ID)
		}
		return out
	}
	if got := picks(rr, 6); !slices.Equal(got, []string{"a", "b", "c", "a", "b", "c"}) {
		t.Errorf("round robin (d disabled) = %v", got)
	}

	// Down policy: one error is not enough; two within the window are; the
	// timeout brings it back.
	b := rr.Instances()[1]
	rr.NoteError(b)
	if got := ids(rr.Instances()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after one error: %v", got)
	}
	advance(30 * time.Second)
	rr.NoteError(b)
	if got := ids(rr.Instances()); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after two errors within the window: %v", got)
	}
	advance(9 * time.Second)
	if got := ids(rr.Instances()); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("before the timeout: %v", got)
	}
	advance(time.Second)
	if got := ids(rr.Instances()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after the timeout: %v", got)
	}
	// Errors farther apart than the window do not add up.
	rr.NoteError(b)
	advance(time.Minute)
	rr.NoteError(b)
	if got := ids(rr.Instances()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after two errors a window apart: %v", got)
	}

	// Filters, and sticky over the filtered set, on the same shared copy.
	st, err := d.Provider(ctx, "api", zkrecipes.WithStrategy(zkrecipes.Sticky(zkrecipes.RoundRobin())),
		zkrecipes.WithFilter(func(in zkrecipes.ServiceInstance) bool { return in.ID != "a" }))
	must(t, err, "Provider")
	defer st.Close()
	if got := picks(st, 3); !slices.Equal(got, []string{"b", "b", "b"}) {
		t.Errorf("sticky = %v, want b thrice", got)
	}
	must(t, regs["b"].Unregister(ctx), "Unregister")
	waitInstances(t, st.Cache(), "a", "c", "d")
	if got := picks(st, 2); !slices.Equal(got, []string{"c", "c"}) {
		t.Errorf("sticky after b left = %v, want c twice", got)
	}

	rnd, err := d.Provider(ctx, "api")
	must(t, err, "Provider")
	defer rnd.Close()
	seen := map[string]bool{}
	for range 200 {
		in, err := rnd.Instance()
		must(t, err, "Instance")
		seen[in.ID] = true
	}
	if len(seen) != 2 || !seen["a"] || !seen["c"] {
		t.Errorf("random picked %v, want a and c", seen)
	}

	// All down: none, as Curator's.
	for _, in := range rr.Instances() {
		rr.NoteError(in)
		rr.NoteError(in)
	}
	if _, err := rr.Instance(); !errors.Is(err, zkrecipes.ErrNoInstances) {
		t.Errorf("Instance with all down = %v", err)
	}
}

// javaInfo stands for a Java POJO payload.
type javaInfo struct {
	Zone    string `json:"zone"`
	Weight  int    `json:"weight"`
	Enabled bool   `json:"enabled"`
}

// TestPayload: a typed payload goes through JSON as Jackson writes and
// reads it: "@class" first for a Java class, dropped when decoding.
func TestPayload(t *testing.T) {
	raw, err := zkrecipes.MarshalPayload(javaInfo{Zone: "z1", Weight: 3}, "com.example.Info")
	must(t, err, "MarshalPayload")
	if want := `{"@class":"com.example.Info","zone":"z1","weight":3,"enabled":false}`; string(raw) != want {
		t.Errorf("payload %s, want %s", raw, want)
	}
	inst := zkrecipes.ServiceInstance{Name: "s", ID: "i", Payload: raw}
	b, err := json.Marshal(inst)
	must(t, err, "marshal")
	var back zkrecipes.ServiceInstance
	must(t, json.Unmarshal(b, &back), "unmarshal")
	got, err := zkrecipes.Payload[javaInfo](back)
	if err != nil || got != (javaInfo{Zone: "z1", Weight: 3}) {
		t.Errorf("Payload = %+v, %v", got, err)
	}
	m, err := zkrecipes.Payload[map[string]any](back)
	if _, ok := m["@class"]; ok || err != nil || m["zone"] != "z1" {
		t.Errorf("Payload as a map = %v, %v", m, err)
	}
	if raw, err := zkrecipes.MarshalPayload(struct{}{}, "com.example.Empty"); err != nil || string(raw) != `{"@class":"com.example.Empty"}` {
		t.Errorf("empty object payload = %s, %v", raw, err)
	}
	if raw, err := zkrecipes.MarshalPayload("plain", ""); err != nil || string(raw) != `"plain"` {
		t.Errorf("string payload = %s, %v", raw, err)
	}
	if _, err := zkrecipes.MarshalPayload("plain", "java.lang.Foo"); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("a non-object for a Java class = %v", err)
	}
	if _, err := zkrecipes.MarshalPayload(map[string]int{"@class": 1}, "X"); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("an @class of its own = %v", err)
	}
	if v, err := zkrecipes.Payload[javaInfo](zkrecipes.ServiceInstance{}); err != nil || v != (javaInfo{}) {
		t.Errorf("no payload = %+v, %v", v, err)
	}
	if _, err := zkrecipes.Payload[int](back); err == nil {
		t.Error("Payload[int] of an object: no error")
	}
}

// TestServiceTransport: requests to zk://<service>/path reach every
// instance (round-robin), keep their path and query, and skip an instance
// whose answers fail.
func TestServiceTransport(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	base := e.path + "/services"
	d := zkrecipes.NewDiscovery(e.session(), base)
	var failing atomic.Bool
	hits := make([]atomic.Int64, 3)
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if i == 2 && failing.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintf(w, "%d %s?%s", i, r.URL.Path, r.URL.RawQuery)
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		host, port, _ := net.SplitHostPort(u.Host)
		p, _ := strconv.Atoi(port)
		_, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: strconv.Itoa(i), Address: host, Port: p})
		must(t, err, "Register")
	}
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tr := &zkrecipes.ServiceTransport{Discovery: d, Options: []zkrecipes.ProviderOption{
		zkrecipes.WithStrategy(zkrecipes.RoundRobin()), zkrecipes.WithProviderClock(clock)}}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	get := func() (int, string) {
		t.Helper()
		resp, err := client.Get("zk://web/hello?x=1")
		must(t, err, "GET")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The first request loads the copy; wait for all three in it.
	get()
	e.waitFor("three instances", func() bool {
		p, err := d.Provider(ctx, "web")
		if err != nil {
			return false
		}
		defer p.Close()
		return len(p.Instances()) == 3
	})
	for range 6 {
		if code, body := get(); code != 200 || body[1:] != " /hello?x=1" {
			t.Errorf("GET = %d %q", code, body)
		}
	}
	for i := range hits {
		if hits[i].Load() < 2 {
			t.Errorf("instance %d got %d requests, want at least 2", i, hits[i].Load())
		}
	}
	failing.Store(true)
	for range 12 {
		get()
	}
	before := hits[2].Load()
	for range 9 {
		if code, _ := get(); code != 200 {
			t.Errorf("GET after the failing instance was skipped: %d", code)
		}
	}
	if hits[2].Load() != before {
		t.Errorf("the failing instance got %d more requests", hits[2].Load()-before)
	}
	// Answering again, it is skipped until the down timeout (Curator's
	// default, 30 s) has passed, then gets its share.
	failing.Store(false)
	advance(29 * time.Second)
	for range 6 {
		get()
	}
	if hits[2].Load() != before {
		t.Errorf("the down instance got %d requests before its timeout", hits[2].Load()-before)
	}
	advance(time.Second)
	for range 6 {
		if code, _ := get(); code != 200 {
			t.Errorf("GET after the down timeout: %d", code)
		}
	}
	if n := hits[2].Load() - before; n != 2 {
		t.Errorf("the instance back from down got %d of 6 requests, want 2", n)
	}
	// An instance that refuses connections: the transport's errors count.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err, "listen")
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close()
	_, err = d.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "dead", Address: "127.0.0.1", Port: deadPort})
	must(t, err, "Register")
	e.waitFor("four instances", func() bool {
		p, err := d.Provider(ctx, "web")
		if err != nil {
			return false
		}
		defer p.Close()
		return len(p.Instances()) == 4
	})
	refused := 0
	for range 12 {
		if resp, err := client.Get("zk://web/"); err != nil {
			refused++
		} else {
			resp.Body.Close()
		}
	}
	if refused != 2 {
		t.Errorf("%d requests refused, want 2 (then the instance is down)", refused)
	}
	if _, err := client.Get("zk://nothing/"); !errors.Is(err, zkrecipes.ErrNoInstances) {
		t.Errorf("GET of a service without instances = %v", err)
	}
}
