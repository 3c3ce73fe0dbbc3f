package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestInspect(t *testing.T) {
	proxy := zktest.NewProxyT(t, servers(t))
	path := testPath(t, "lock")

	// The holder talks through the proxy; cutting it leaves its session
	// alive on the server (30s timeout) but connected nowhere: its node
	// is an orphan until the session expires.
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	s, err := zkrecipes.NewSession(ctx, []string{proxy.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Refuse(false)
		s.Close()
	})
	if err := zkrecipes.NewMutex(s, path).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	conn := admin(t)
	waiter := start(t, nil, "lock", "--id", "waiter-1", path, "--", "true")
	eventually(t, 10*time.Second, "zkr lock did not queue", func() bool { return len(children(t, conn, path)) == 2 })

	r := zkr(t, "inspect", path)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d; stderr %q", r.code, r.stderr)
	}
	t.Logf("inspect:\n%s", r.stdout)
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], path+": lock, 2 in queue") || len(lines) < 4 {
		t.Fatalf("unexpected report:\n%s", r.stdout)
	}
	holder, next := strings.Fields(lines[2]), strings.Fields(lines[3])
	if holder[0] != "#1" || holder[1] != "holds" || holder[5] != sessionHex(s) {
		t.Errorf("first line should be the test's session holding: %q", lines[2])
	}
	if next[0] != "#2" || next[1] != "waits" || next[3] != "#1" || !strings.Contains(lines[3], "waiter-1") {
		t.Errorf("second line should be zkr (--id waiter-1) waiting for #1: %q", lines[3])
	}
	if strings.Contains(r.stdout, "ORPHANED") {
		t.Errorf("nobody is orphaned yet:\n%s", r.stdout)
	}

	proxy.Refuse(true)
	proxy.Cut()
	eventually(t, 10*time.Second, "the cut holder is not flagged as orphaned", func() bool {
		r = zkr(t, "inspect", path)
		lines = strings.Split(r.stdout, "\n")
		return len(lines) > 3 && strings.Contains(lines[2], "ORPHANED?") && !strings.Contains(lines[3], "ORPHANED")
	})

	r = zkr(t, "inspect", path, "--json")
	var in inspection
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	if len(in.Contenders) != 2 || !in.SessionsKnown || in.Contenders[0].Orphaned == nil || !*in.Contenders[0].Orphaned ||
		in.Contenders[1].State != "waits" || in.Contenders[1].WaitsFor != 1 {
		t.Errorf("inspect --json: %+v", in)
	}
	if waiter.exited() {
		t.Errorf("zkr lock stopped waiting: %s", waiter.stderr.String())
	}
}

func TestInspectElection(t *testing.T) {
	servers(t)
	path := testPath(t, "election")
	conn := admin(t)
	start(t, nil, "elect", path, "--id", "first", "--", "sleep", "60")
	eventually(t, 10*time.Second, "no candidate", func() bool { return len(children(t, conn, path)) == 1 })
	start(t, nil, "elect", path, "--id", "second", "--", "sleep", "60")
	eventually(t, 10*time.Second, "no second candidate", func() bool { return len(children(t, conn, path)) == 2 })
	r := zkr(t, "inspect", path)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], path+": election, 2 in queue") {
		t.Fatalf("unexpected report:\n%s", r.stdout)
	}
	if f := strings.Fields(lines[2]); f[1] != "leads" || f[2] != "candidate" || f[4] != "first" {
		t.Errorf("first line should be the leader, id first: %q", lines[2])
	}
	if f := strings.Fields(lines[3]); f[1] != "waits" || f[4] != "second" {
		t.Errorf("second line should be a candidate, id second: %q", lines[3])
	}
	if r := zkr(t, "inspect", testPath(t, "nothing")); r.code != 0 || !strings.Contains(r.stdout, "does not exist") {
		t.Errorf("inspecting a missing path: exit %d, %q", r.code, r.stdout)
	}
}

// sessionHex is how inspect shows the session's id.
func sessionHex(s *zkrecipes.Session) string {
	return fmt.Sprintf("0x%x", s.ID())
}

// inspectJSON runs zkr inspect PATH --json.
func inspectJSON(t *testing.T, path string) inspection {
	t.Helper()
	r := zkr(t, "inspect", path, "--json")
	if r.code != 0 {
		t.Fatalf("inspect %s: exit %d; stderr %q", path, r.code, r.stderr)
	}
	var in inspection
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	return in
}

// entries is the view's entries, one "state:kind:id" each.
func entries(in inspection) string {
	var out []string
	for _, cv := range in.Contenders {
		e := cv.State + ":" + cv.Kind + ":" + cv.ID
		if cv.TakenBy != "" {
			e += ":" + cv.TakenBy
		}
		out = append(out, e)
	}
	return strings.Join(out, " ")
}

// recipeFixture makes, on real ZooKeeper through the library's recipes,
// one of each recipe that is not a line of contenders, under base, and
// returns the path of each and what zkr inspect must show of it: the
// recipe, its summary line and its entries ("state:kind:id").
func recipeFixture(t *testing.T, base string) []recipeWant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	session := func() *zkrecipes.Session { return testSession(t, ctx) }
	s := session()
	t.Cleanup(func() { s.DeleteTree(context.Background(), base) })
	var want []recipeWant

	// A semaphore of 3 permits, two leases held.
	sem := base + "/sem"
	for _, id := range []string{"worker-1", "worker-2"} {
		if _, err := zkrecipes.NewSemaphore(session(), sem, 3, zkrecipes.WithNodeData([]byte(id))).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{sem, "semaphore", "semaphore, 2 leases held (3 permits), 0 waiting", "holds:lease:worker-1 holds:lease:worker-2"})

	// A work queue of three items.
	q := base + "/queue"
	for _, item := range []string{"job-1", "job-2", "job-3"} {
		if err := zkrecipes.NewQueue(s, q).Offer(ctx, []byte(item)); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{q, "queue", "queue, 3 items", "queued:item:job-1 queued:item:job-2 queued:item:job-3"})

	// A locking queue: two items, the first taken.
	lq := base + "/lqueue"
	lqc := zkrecipes.NewLockingQueue(session(), lq)
	for _, item := range []string{"task-1", "task-2"} {
		if err := lqc.Offer(ctx, []byte(item)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lqc.Take(ctx); err != nil {
		t.Fatal(err)
	}
	taken := children(t, admin(t), lq+"/taken")
	if len(taken) != 1 {
		t.Fatalf("the locking queue's taken items: %v", taken)
	}
	consumer := nodeData(t, s, lq+"/taken/"+taken[0])
	want = append(want, recipeWant{lq, "locking queue", "locking queue, 2 items (1 taken)", "taken:item:task-1:" + consumer + " queued:item:task-2"})

	// A group of two members.
	g := base + "/group"
	for _, id := range []string{"m1", "m2"} {
		if _, err := zkrecipes.JoinGroup(ctx, session(), g, id, []byte("data-of-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{g, "group", "group, 2 members", "member:member:data-of-m1 member:member:data-of-m2"})

	// A service of two instances, one disabled.
	d := zkrecipes.NewDiscovery(session(), base+"/services")
	for i, port := range []int{8080, 8081} {
		if _, err := d.Register(ctx, zkrecipes.ServiceInstance{Name: "mailer", ID: fmt.Sprintf("i%d", i), Address: "10.0.0.1", Port: port, Disabled: i == 1}); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{base + "/services/mailer", "service", "service, 2 instances", "registered:instance:10.0.0.1:8080 disabled:instance:10.0.0.1:8081"})

	// A double barrier of two, both entered.
	db := base + "/barrier"
	entered := make(chan error, 2)
	for range 2 {
		b := zkrecipes.NewDoubleBarrier(session(), db, 2)
		go func() { entered <- b.Enter(ctx) }()
	}
	for range 2 {
		if err := <-entered; err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{db, "double barrier", "double barrier, 2 entered, ready", "entered:participant: entered:participant:"})

	// The same, its participants named by UUIDs that end in ten decimal
	// digits, as about one in a hundred does (Curator's and zkrecipes'
	// form, and kazoo's): they are not sequence numbers.
	conn, acl := admin(t), zkclient.WorldACL(zkclient.PermAll)
	db2 := base + "/barrier-digits"
	for _, p := range []struct {
		name string
		mode zkclient.CreateMode
	}{
		{"", zkclient.Persistent},
		{"/0b5e4c1d-9f2a-4e7b-8c3d-001234567890", zkclient.Ephemeral},
		{"/4f1c9e2ab07d4c5e8a9b121234567890", zkclient.Ephemeral},
		{"/" + barrierReady, zkclient.Ephemeral},
	} {
		if _, err := conn.Create(ctx, db2+p.name, nil, p.mode, acl); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, recipeWant{db2, "double barrier", "double barrier, 2 entered, ready", "entered:participant: entered:participant:"})
	return want
}

// recipeWant is what zkr inspect must show of a recipe at Path.
type recipeWant struct {
	Path, Recipe, Summary, Entries string
}

// TestInspectRecipes: zkr inspect recognises, from their nodes on real
// ZooKeeper, a semaphore (its leases and permits), a work queue (its items
// in order), a locking queue (the item taken, by whom), a group (its
// members), a service's instances (address:port, disabled) and a double
// barrier (who entered).
func TestInspectRecipes(t *testing.T) {
	base := testPath(t, "recipes")
	for _, w := range recipeFixture(t, base) {
		in := inspectJSON(t, w.Path)
		if in.Recipe != w.Recipe || entries(in) != w.Entries || in.summary() != w.Summary {
			t.Errorf("inspect %s: %s, %q, entries %q; want %s, %q, %q", w.Path, in.Recipe, in.summary(), entries(in), w.Recipe, w.Summary, w.Entries)
		}
		r := zkr(t, "inspect", w.Path)
		if first := strings.SplitN(r.stdout, "\n", 2)[0]; first != w.Path+": "+w.Summary {
			t.Errorf("inspect %s: first line %q", w.Path, first)
		}
	}
}

// TestSeqNumber: the sequence number ending a node's name, wrapped
// counters included; a name's other digits and dashes are not part of it.
func TestSeqNumber(t *testing.T) {
	for name, want := range map[string]int64{
		"_c_0b5e-4c1d-lease-0000000001": 1, "qn-0000000123": 123, "entry-100-0000000007": 7,
		"x--000000005": -5, "x-2147483648": -2147483648, "lock-2147483647": 2147483647,
		"_c_0b5e4c1d-9f2a-4e7b-8c3d-001234567890-lock-0000000042": 42,
	} {
		if v, ok := seqNumber(name); !ok || v != want {
			t.Errorf("seqNumber(%q) = %d, %v; want %d", name, v, ok, want)
		}
	}
	for _, name := range []string{"abc", "lock-", "m1", "x-12345678a9",
		"0b5e4c1d-9f2a-4e7b-8c3d-001234567890", "4f1c9e2ab07d4c5e8a9b121234567890"} {
		if v, ok := seqNumber(name); ok {
			t.Errorf("seqNumber(%q) = %d, true; want none", name, v)
		}
	}
}

// layoutFixture queues, on path, a zkr Mutex (Curator's naming) holding
// and a contender named as kazoo names its Lock's nodes, on a session of
// its own.
func layoutFixture(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	s := testSession(t, ctx)
	if err := zkrecipes.NewMutex(s, path, zkrecipes.WithNodeData([]byte("zkr"))).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, path+"/3f1e7a2b6c4d4d0e9c590f8e7cd21b5a__lock__", []byte("kazoo"), zkclient.EphemeralSequential, nil); err != nil {
		t.Fatal(err)
	}
}

// TestInspectLayouts: zkr inspect tells the layout of each contender's
// node name: Curator's (which zkr writes) or kazoo's, and "+grants" for a
// contender that takes grants (a version-8 UUID).
func TestInspectLayouts(t *testing.T) {
	path := testPath(t, "lock")
	layoutFixture(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	if _, err := testSession(t, ctx).Create(ctx, path+"/_c_3d79e131-561e-8abc-9c59-3f1e7a2b6c4d-lock-", []byte("granting"), zkclient.EphemeralSequential, nil); err != nil {
		t.Fatal(err)
	}
	in := inspectJSON(t, path)
	var got []string
	for _, cv := range in.Contenders {
		got = append(got, fmt.Sprintf("%s:%s:%v", cv.ID, cv.Layout, cv.Grants))
	}
	if want := "zkr:curator:false kazoo:kazoo:false granting:curator:true"; strings.Join(got, " ") != want {
		t.Errorf("inspect --json: layouts %q, want %s", got, want)
	}
	r := zkr(t, "inspect", path)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 5 || strings.Fields(lines[1])[8] != "LAYOUT" || strings.Fields(lines[2])[7] != "curator" ||
		strings.Fields(lines[3])[7] != "kazoo" || strings.Fields(lines[4])[7] != "curator+grants" {
		t.Errorf("inspect: no LAYOUT column saying curator, kazoo, then curator+grants:\n%s", r.stdout)
	}
}
