package zkrecipes_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// curatorInstanceJSON is what Curator 5.4's JsonInstanceSerializer writes for
// ServiceInstance.builder().name("web").id("i1").address("10.0.0.1")
// .port(8080).payload("hello").uriSpec(new UriSpec("{scheme}://{address}:{port}"))
// .registrationTimeUTC(1700000000000L).
const curatorInstanceJSON = `{"name":"web","id":"i1","address":"10.0.0.1","port":8080,"sslPort":null,"payload":"hello","registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true}]}}`

// TestServiceInstanceJSON: the JSON of an instance is byte for byte
// Curator's, and Curator's reads back (a payload with Jackson's "@class"
// kept as it is).
func TestServiceInstanceJSON(t *testing.T) {
	in := zkrecipes.ServiceInstance{
		Name: "web", ID: "i1", Address: "10.0.0.1", Port: 8080,
		Payload:          json.RawMessage(`"hello"`),
		RegistrationTime: time.UnixMilli(1700000000000),
		URISpec:          "{scheme}://{address}:{port}",
	}
	b, err := json.Marshal(in)
	must(t, err, "marshal")
	if string(b) != curatorInstanceJSON {
		t.Errorf("JSON\n%s\nwant Curator's\n%s", b, curatorInstanceJSON)
	}
	var back zkrecipes.ServiceInstance
	must(t, json.Unmarshal([]byte(curatorInstanceJSON), &back), "unmarshal")
	in.Type = "DYNAMIC"
	if back.URI(nil) != "http://10.0.0.1:8080" || !equalInstances(back, in) {
		t.Errorf("read back %+v (URI %q)", back, back.URI(nil))
	}

	java := `{"name":"db","id":"x","address":null,"port":null,"sslPort":9443,"payload":{"@class":"java.util.HashMap","k":"v"},"registrationTimeUTC":1,"serviceType":"PERMANENT","uriSpec":null,"enabled":false,"future":1}`
	var j zkrecipes.ServiceInstance
	must(t, json.Unmarshal([]byte(java), &j), "unmarshal")
	if j.Address != "" || j.Port != 0 || j.SSLPort != 9443 || string(j.Payload) != `{"@class":"java.util.HashMap","k":"v"}` ||
		j.Type != "PERMANENT" || !j.Disabled || j.URISpec != "" || j.URI(nil) != "" {
		t.Errorf("read %+v", j)
	}
	// Literal braces are Curator's {[} and {]}; fields are trimmed.
	spec := zkrecipes.ServiceInstance{ID: "i", SSLPort: 1, URISpec: "{ scheme }://h/{[}{id}{]}{missing}"}
	if u := spec.URI(map[string]string{"id": "over"}); u != "https://h/{over}" {
		t.Errorf("URI = %q", u)
	}
	for _, bad := range []zkrecipes.ServiceInstance{{URISpec: "{open"}, {URISpec: "close}"}, {Payload: json.RawMessage("{")}} {
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("marshal %+v: no error", bad)
		}
	}
}

func equalInstances(a, b zkrecipes.ServiceInstance) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Address == b.Address && a.Port == b.Port && a.SSLPort == b.SSLPort &&
		string(a.Payload) == string(b.Payload) && a.RegistrationTime.Equal(b.RegistrationTime) && a.Type == b.Type &&
		a.URISpec == b.URISpec && a.Disabled == b.Disabled
}

func ids(insts []zkrecipes.ServiceInstance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.ID
	}
	return out
}

// TestDiscoveryRegister: instances are ephemeral nodes base/name/id holding
// their JSON; queries and the watch see them; an id held by another
// session is not taken over.
func TestDiscoveryRegister(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	base := e.path + "/services"
	s1, s2 := e.session(), e.session()
	d1, d2 := zkrecipes.NewDiscovery(s1, base), zkrecipes.NewDiscovery(s2, base)

	watch, err := d2.Watch(ctx, "web")
	must(t, err, "Watch")
	defer watch.Close()
	next := func(want ...string) []zkrecipes.ServiceInstance {
		t.Helper()
		got, err := nextWithin(watch, 20*time.Second)
		if err != nil {
			t.Fatalf("watch: nothing after 20s (%v), want %v", err, want)
		}
		if !slices.Equal(ids(got), want) {
			t.Fatalf("watch: %v, want %v", ids(got), want)
		}
		return got
	}
	next()

	r1, err := d1.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "a", Address: "10.0.0.1", Port: 80, Payload: json.RawMessage(`{"zone":"z1"}`)})
	must(t, err, "Register")
	next("a")
	r2, err := d2.Register(ctx, zkrecipes.ServiceInstance{Name: "web", Port: 81})
	must(t, err, "Register")
	id2 := r2.Instance().ID
	if len(id2) != 36 || r2.Instance().RegistrationTime.IsZero() {
		t.Errorf("defaults: id %q, time %v; want a UUID and now", id2, r2.Instance().RegistrationTime)
	}
	next(slices.Sorted(slices.Values([]string{"a", id2}))...)
	_, err = d1.Register(ctx, zkrecipes.ServiceInstance{Name: "db", ID: "d"})
	must(t, err, "Register")

	data, st, err := e.admin.Get(base + "/web/a")
	must(t, err, "get")
	want, _ := json.Marshal(r1.Instance())
	if string(data) != string(want) || st.EphemeralOwner != s1.ID() {
		t.Errorf("node %s (owner 0x%x), want %s, ephemeral of 0x%x", data, st.EphemeralOwner, want, s1.ID())
	}
	if names, err := d2.Services(ctx); !slices.Equal(names, []string{"db", "web"}) || err != nil {
		t.Errorf("Services = %v, %v", names, err)
	}
	insts, err := d2.Instances(ctx, "web")
	must(t, err, "Instances")
	if len(insts) != 2 || !equalInstances(insts[slices.Index(ids(insts), "a")], r1.Instance()) {
		t.Errorf("Instances = %+v", insts)
	}
	if in, ok, err := d2.Instance(ctx, "web", "a"); !ok || err != nil || string(in.Payload) != `{"zone":"z1"}` {
		t.Errorf("Instance(web, a) = %+v, %v, %v", in, ok, err)
	}
	if _, ok, err := d2.Instance(ctx, "web", "nobody"); ok || err != nil {
		t.Errorf("Instance of a missing id = %v, %v", ok, err)
	}
	if _, err := d2.Register(ctx, zkrecipes.ServiceInstance{Name: "web", ID: "a"}); !errors.Is(err, zkrecipes.ErrMemberExists) {
		t.Errorf("Register of another session's id = %v, want ErrMemberExists", err)
	}
	for _, bad := range []zkrecipes.ServiceInstance{{Name: ""}, {Name: "a/b"}, {Name: "web", ID: ".."}, {Name: "web", Type: "PERMANENT"}} {
		if _, err := d1.Register(ctx, bad); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
			t.Errorf("Register(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}

	up := r1.Instance()
	up.Port = 8080
	must(t, r1.Update(ctx, up), "Update")
	if got := next(slices.Sorted(slices.Values([]string{"a", id2}))...); got[slices.Index(ids(got), "a")].Port != 8080 {
		t.Errorf("watch after Update: %+v", got)
	}
	must(t, r2.Unregister(ctx), "Unregister")
	next("a")
	closed(t, r2.Lost(), "Lost after Unregister")
	// Registering again on the session that holds the id updates it.
	again := r1.Instance()
	again.Port = 9090
	if _, err := d1.Register(ctx, again); err != nil {
		t.Errorf("Register again on the same session = %v", err)
	}
	if got := next("a"); got[0].Port != 9090 {
		t.Errorf("watch after registering again: %+v", got)
	}

	// A cancelled Register leaves nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d1.Register(cctx, zkrecipes.ServiceInstance{Name: "web", ID: "c"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Register = %v", err)
	}
	if kids := e.children(base + "/web"); !slices.Equal(kids, []string{"a"}) {
		t.Errorf("instances left: %v", kids)
	}
}

// TestDiscoveryKeepRegistered: a registration ends with its session;
// KeepRegistered registers the instance again on a new session after an
// expiry, waits while its id is held by another session, and unregisters
// when its context ends.
func TestDiscoveryKeepRegistered(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	base := e.path + "/services"
	node := base + "/web/k"
	inst := zkrecipes.ServiceInstance{Name: "web", ID: "k", Port: 1}

	// Another session holds the id first.
	holder, err := zkrecipes.NewDiscovery(e.session(), base).Register(ctx, inst)
	must(t, err, "Register")

	sessions := make(chan *zkrecipes.Session, 10)
	newSession := func(ctx context.Context) (*zkrecipes.Session, error) {
		s, err := zkrecipes.NewSession(ctx, e.servers)
		if err == nil {
			sessions <- s
		}
		return s, err
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	done := async(func() error { return zkrecipes.KeepRegistered(kctx, newSession, base, inst) })
	nextSession := func() *zkrecipes.Session {
		t.Helper()
		select {
		case s := <-sessions:
			return s
		case <-time.After(zktest.Bound(30 * time.Second)):
			t.Fatal("KeepRegistered asked for no session within 30s")
			return nil
		}
	}
	first := nextSession()
	// The holder watches its node (see Registration.Lost), KeepRegistered
	// waits for it to go.
	e.waitFor("KeepRegistered to wait for the held id", func() bool { return watchersOf(t, e.servers[0], node) == 2 })
	must(t, holder.Unregister(ctx), "Unregister")
	owner := func() int64 {
		_, st, err := e.admin.Get(node)
		if err != nil {
			return 0
		}
		return st.EphemeralOwner
	}
	e.waitFor("the instance on the first session", func() bool { return owner() == first.ID() })

	e.expire(first)
	second := nextSession()
	e.waitFor("the instance on a new session", func() bool { return owner() == second.ID() })
	closed(t, first.Done(), "the expired session")

	stop()
	if err := result(t, done, "KeepRegistered"); err != nil {
		t.Errorf("KeepRegistered = %v after its context ended", err)
	}
	closed(t, second.Done(), "KeepRegistered's session after it returned")
	e.empty(base + "/web")

	if err := zkrecipes.KeepRegistered(ctx, newSession, base, zkrecipes.ServiceInstance{}); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("KeepRegistered without a name = %v", err)
	}
}
