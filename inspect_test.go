package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// shape shows a queue view as "kind:holds|waits>N:data" per entry.
func shape(v zkrecipes.Contenders) string {
	parts := make([]string, len(v.Entries))
	for i, en := range v.Entries {
		state := "holds"
		if !en.Holds {
			state = fmt.Sprintf("waits>%d", en.WaitsFor)
		}
		parts[i] = en.Kind + ":" + state + ":" + string(en.Data)
	}
	return strings.Join(parts, " ")
}

// inspect runs Inspect and checks what every view must satisfy: entries in
// sequence order, and Holds exactly when WaitsFor is -1.
func inspect(t *testing.T, ctx context.Context, s *zkrecipes.Session, path string) zkrecipes.Contenders {
	t.Helper()
	v, err := zkrecipes.Inspect(ctx, s, path)
	must(t, err, "Inspect %s", path)
	if v.Path != path {
		t.Errorf("view of %s has Path %q", path, v.Path)
	}
	for i, en := range v.Entries {
		if i > 0 && en.Seq <= v.Entries[i-1].Seq {
			t.Errorf("entry %d (%s) is out of sequence order", i, en.Node)
		}
		if en.Holds != (en.WaitsFor == -1) || en.WaitsFor >= i {
			t.Errorf("entry %d (%s): Holds %v, WaitsFor %d", i, en.Node, en.Holds, en.WaitsFor)
		}
	}
	return v
}

// queued waits until n nodes are queued under path.
func (e *env) queued(path string, n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d nodes under %s", n, path), func() bool { return len(e.children(path)) == n })
}

// TestInspectMutex: a holder and two waiters, seen by a session that is
// not a contender, with their owners, data and order; a node that is not a
// contender is listed apart; the view follows a release.
func TestInspectMutex(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	ss := []*zkrecipes.Session{e.session(), e.session(), e.session()}
	ms := make([]*zkrecipes.Mutex, len(ss))
	for i, s := range ss {
		ms[i] = zkrecipes.NewMutex(s, path, zkrecipes.WithNodeData([]byte(fmt.Sprintf("c%d", i))))
	}
	must(t, ms[0].Lock(ctx), "c0: Lock")
	e.queued(path, 1)
	w1 := async(func() error { return ms[1].Lock(ctx) })
	e.queued(path, 2)
	w2 := async(func() error { return ms[2].Lock(ctx) })
	e.queued(path, 3)
	_, err := e.admin.Create(path+"/config", []byte("x"), zkclient.Persistent, openACL)
	must(t, err, "create a child that is not a contender")

	observer := e.session()
	start := time.Now()
	v := inspect(t, ctx, observer, path)
	if got, want := shape(v), "mutex:holds:c0 mutex:waits>0:c1 mutex:waits>1:c2"; got != want {
		t.Errorf("Inspect = %s, want %s", got, want)
	}
	if !v.Exists || !slices.Equal(v.Others, []string{"config"}) {
		t.Errorf("Exists %v, Others %q; want true, [config]", v.Exists, v.Others)
	}
	for i, en := range v.Entries {
		if en.Owner != ss[i].ID() {
			t.Errorf("entry %d: Owner 0x%x, want c%d's session 0x%x", i, en.Owner, i, ss[i].ID())
		}
		if d := start.Sub(en.Created); d < -5*time.Second || d > time.Minute {
			t.Errorf("entry %d: Created %v, %v before the call", i, en.Created, d)
		}
		if !strings.HasSuffix(en.Node, fmt.Sprintf("lock-%010d", en.Seq)) {
			t.Errorf("entry %d: Node %q does not end in its Seq %d", i, en.Node, en.Seq)
		}
	}

	must(t, ms[0].Unlock(ctx), "c0: Unlock")
	must(t, result(t, w1, "c1: Lock"), "c1: Lock")
	v = inspect(t, ctx, observer, path)
	if got, want := shape(v), "mutex:holds:c1 mutex:waits>0:c2"; got != want {
		t.Errorf("after c0's Unlock, Inspect = %s, want %s", got, want)
	}
	if len(v.Entries) == 2 && v.Entries[0].Owner != ss[1].ID() {
		t.Errorf("after c0's Unlock, the holder is 0x%x, want c1's session 0x%x", v.Entries[0].Owner, ss[1].ID())
	}

	must(t, ms[1].Unlock(ctx), "c1: Unlock")
	must(t, result(t, w2, "c2: Lock"), "c2: Lock")
	must(t, ms[2].Unlock(ctx), "c2: Unlock")
	must(t, e.admin.Delete(path+"/config", -1), "delete the other child")
	e.empty(path)
}

// TestInspectRWMutex: readers before the first writer all hold; a reader
// after it waits for it, and a Mutex behind counts as a writer.
func TestInspectRWMutex(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	s := e.session()
	rw := func(id string) *zkrecipes.RWMutex {
		return zkrecipes.NewRWMutex(s, path, zkrecipes.WithNodeData([]byte(id)))
	}
	r1, r2, w, r3 := rw("r1"), rw("r2"), rw("w"), rw("r3")
	m := zkrecipes.NewMutex(s, path, zkrecipes.WithNodeData([]byte("m")))
	must(t, r1.RLock(ctx), "r1: RLock")
	must(t, r2.RLock(ctx), "r2: RLock")
	ww := async(func() error { return w.Lock(wctx) })
	e.queued(path, 3)
	wr3 := async(func() error { return r3.RLock(wctx) })
	e.queued(path, 4)
	wm := async(func() error { return m.Lock(wctx) })
	e.queued(path, 5)

	v := inspect(t, ctx, e.session(), path)
	want := "reader:holds:r1 reader:holds:r2 writer:waits>1:w reader:waits>2:r3 writer:waits>3:m"
	if got := shape(v); got != want {
		t.Errorf("Inspect = %s\nwant      %s", got, want)
	}
	if len(v.Others) != 0 {
		t.Errorf("Others = %q, want none", v.Others)
	}

	wcancel()
	for _, ch := range []<-chan error{ww, wr3, wm} {
		if err := result(t, ch, "cancelled waiter"); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter returned %v", err)
		}
	}
	must(t, r1.RUnlock(ctx), "r1: RUnlock")
	must(t, r2.RUnlock(ctx), "r2: RUnlock")
	e.empty(path)
}

// TestInspectForeignNodes: nodes named by Curator and kazoo, made by hand,
// are recognised and ranked like the recipes' own; persistent nodes have
// no owner, and nodes that only look like contenders are others.
func TestInspectForeignNodes(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	e.mkdirs(path)
	for _, name := range []string{"_c_x-__WRIT__", "_c_x-__READ__", "id__rlock__", "id__lock__"} {
		_, err := e.admin.Create(path+"/"+name, nil, zkclient.PersistentSequential, openACL)
		must(t, err, "create %s", name)
	}
	for _, name := range []string{"member-a", "lock-12345", "x-lock-abcdefghij", "lock-9999999999"} {
		_, err := e.admin.Create(path+"/"+name, nil, zkclient.Persistent, openACL)
		must(t, err, "create %s", name)
	}
	v := inspect(t, ctx, e.session(), path)
	if got, want := shape(v), "writer:holds: reader:waits>0: reader:waits>0: writer:waits>2:"; got != want {
		t.Errorf("Inspect = %s\nwant      %s", got, want)
	}
	for i, en := range v.Entries {
		if en.Owner != 0 {
			t.Errorf("entry %d: Owner 0x%x for a persistent node", i, en.Owner)
		}
	}
	if want := []string{"lock-12345", "lock-9999999999", "member-a", "x-lock-abcdefghij"}; !slices.Equal(v.Others, want) {
		t.Errorf("Others = %q, want %q", v.Others, want)
	}
}

// TestInspectLayouts: each contender is labelled with the naming it
// follows: a Mutex's node and a node named as Curator names it are
// Curator's, one named as kazoo names it is kazoo's, and others (no
// protected prefix, or a prefix that is not a UUID) are neither; only a
// version-8 UUID (a contender made WithGrants) takes grants.
func TestInspectLayouts(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	if err := zkrecipes.NewMutex(e.session(), path).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"_c_0f8e7cd2-1b5a-4d0e-9c59-3f1e7a2b6c4d-lock-", // Curator's InterProcessMutex
		"3f1e7a2b6c4d4d0e9c590f8e7cd21b5a__lock__",      // kazoo's Lock
		"lock-", // ZooKeeper's own recipe: no prefix
		"_c_3f1e7a2b6c4d4d0e9c590f8e7cd21b5a-lock-",     // a prefix, not a UUID's text
		"3f1e7a2b6c4d4d0e9c590f8e7cd21b5a__rlock__",     // kazoo's ReadLock
		"_c_host-a.example.org-worker-7-process1-lock-", // 36 characters, not a UUID
		"_c_3d79e131-561e-8abc-9c59-3f1e7a2b6c4d-lock-", // a version-8 UUID: takes grants
	} {
		_, err := e.admin.Create(path+"/"+name, nil, zkclient.PersistentSequential, openACL)
		must(t, err, "create %s", name)
	}
	v := inspect(t, ctx, e.session(), path)
	var got []string
	var grants []bool
	for _, en := range v.Entries {
		got = append(got, en.Layout)
		grants = append(grants, en.Grants)
	}
	if want := []string{"curator", "curator", "kazoo", "", "", "kazoo", "", "curator"}; !slices.Equal(got, want) {
		t.Errorf("layouts %q, want %q", got, want)
	}
	if want := []bool{false, false, false, false, false, false, false, true}; !slices.Equal(grants, want) {
		t.Errorf("takes grants: %v, want %v", grants, want)
	}
}

// TestInspectElection: candidates, the leader first, with their ids.
func TestInspectElection(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/election"
	ctx := ctxTimeout(t, time.Minute)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	leader := zkrecipes.NewElection(e.session(), path, "alpha")
	must(t, leader.Campaign(ctx), "alpha: Campaign")
	next := zkrecipes.NewElection(e.session(), path, "beta")
	wb := async(func() error { return next.Campaign(wctx) })
	e.queued(path, 2)

	v := inspect(t, ctx, e.session(), path)
	if got, want := shape(v), "candidate:holds:alpha candidate:waits>0:beta"; got != want {
		t.Errorf("Inspect = %s, want %s", got, want)
	}

	wcancel()
	if err := result(t, wb, "beta: Campaign"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Campaign returned %v", err)
	}
	must(t, leader.Resign(ctx), "alpha: Resign")
	e.empty(path)
}

// TestInspectMissing: a path that does not exist is an empty view, a bad
// path an error.
func TestInspectMissing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	v, err := zkrecipes.Inspect(ctx, s, e.path+"/nothing")
	if err != nil || v.Exists || len(v.Entries) != 0 || len(v.Others) != 0 {
		t.Errorf("Inspect of a missing path = %+v, %v; want an empty view", v, err)
	}
	if _, err := zkrecipes.Inspect(ctx, s, "relative"); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("Inspect of a relative path = %v, want ErrInvalidPath", err)
	}
}

// TestGroupObserver: a session that is not a member lists and follows a
// group: joins, updates, leaves, and the group appearing after the watch
// began.
func TestGroupObserver(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/group"
	ctx := ctxTimeout(t, time.Minute)
	observer := e.session()

	ms, err := zkrecipes.GroupMembers(ctx, observer, path)
	if err != nil || len(ms) != 0 {
		t.Errorf("GroupMembers of a missing group = %q, %v; want none", render(ms), err)
	}
	watch, err := zkrecipes.WatchGroup(ctx, observer, path)
	must(t, err, "WatchGroup")
	defer watch.Close()
	w := &watcher{who: "observer", ch: watch, last: "-"}
	w.see(t, "")

	a, err := zkrecipes.JoinGroup(ctx, e.session(), path, "a", []byte("1"))
	must(t, err, "a: JoinGroup")
	w.see(t, "a=1")
	b, err := zkrecipes.JoinGroup(ctx, e.session(), path, "b", nil)
	must(t, err, "b: JoinGroup")
	w.see(t, "a=1,b=")
	must(t, a.Update(ctx, []byte("2")), "a: Update")
	w.see(t, "a=2,b=")
	ms, err = zkrecipes.GroupMembers(ctx, observer, path)
	must(t, err, "GroupMembers")
	if got := render(ms); got != "a=2,b=" {
		t.Errorf("GroupMembers = %q, want %q", got, "a=2,b=")
	}
	must(t, a.Leave(ctx), "a: Leave")
	w.see(t, "b=")
	must(t, b.Leave(ctx), "b: Leave")
	w.see(t, "")

	if _, err := zkrecipes.GroupMembers(ctx, observer, "/x//y"); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("GroupMembers of a bad path = %v, want ErrInvalidPath", err)
	}
	if st, err := zkrecipes.WatchGroup(ctx, observer, "/x//y"); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("WatchGroup of a bad path = %v, %v; want ErrInvalidPath", st, err)
	}
	watch.Close()
	e.empty(path)
}
