package zkrecipes_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The data plane: every call, its errors, and paths refused before any
// request.
func TestDataPlane(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	base := e.path + "/data"

	// Parents: refused without CreateParents, made with it.
	if _, err := s.Create(ctx, base+"/a/b", []byte("x"), zkclient.Persistent, nil); !errors.Is(err, zkclient.ErrNoNode) {
		t.Fatalf("Create under a missing parent = %v, want ErrNoNode", err)
	}
	must(t, s.CreateParents(ctx, base+"/a/b", zkclient.Persistent, nil), "CreateParents")
	created, err := s.Create(ctx, base+"/a/b", []byte("x"), zkclient.Persistent, nil)
	must(t, err, "Create with parents")
	if created.Path != base+"/a/b" || created.Stat.Version != 0 || created.Stat.DataLength != 1 {
		t.Errorf("Created %+v", created)
	}
	if _, err := s.Create(ctx, base+"/a/b", nil, zkclient.Persistent, nil); !errors.Is(err, zkclient.ErrNodeExists) {
		t.Errorf("second Create = %v, want ErrNodeExists", err)
	}
	// Null data stays null; empty stays empty.
	must2(t)(s.Create(ctx, base+"/null", nil, zkclient.Persistent, nil))
	must2(t)(s.Create(ctx, base+"/empty", []byte{}, zkclient.Persistent, nil))
	if d, _, err := s.Get(ctx, base+"/null"); err != nil || d != nil {
		t.Errorf("Get of null data = %q (nil %v), %v", d, d == nil, err)
	}
	if d, _, err := s.Get(ctx, base+"/empty"); err != nil || d == nil || len(d) != 0 {
		t.Errorf("Get of empty data = %q (nil %v), %v", d, d == nil, err)
	}

	// Versions.
	st, err := s.Set(ctx, base+"/a/b", []byte("y"), 0)
	must(t, err, "Set at version 0")
	if st.Version != 1 {
		t.Errorf("version after Set %d, want 1", st.Version)
	}
	if _, err := s.Set(ctx, base+"/a/b", []byte("z"), 0); !errors.Is(err, zkclient.ErrBadVersion) {
		t.Errorf("Set at a stale version = %v, want ErrBadVersion", err)
	}
	if d, st, err := s.Get(ctx, base+"/a/b"); err != nil || string(d) != "y" || st.Version != 1 {
		t.Errorf("Get = %q %d %v, want y at version 1", d, st.Version, err)
	}
	if err := s.Delete(ctx, base+"/a/b", 0); !errors.Is(err, zkclient.ErrBadVersion) {
		t.Errorf("Delete at a stale version = %v, want ErrBadVersion", err)
	}
	if err := s.Delete(ctx, base+"/a", -1); !errors.Is(err, zkclient.ErrNotEmpty) {
		t.Errorf("Delete of a parent = %v, want ErrNotEmpty", err)
	}

	// Modes.
	seq, err := s.Create(ctx, base+"/seq-", nil, zkclient.PersistentSequential, nil)
	must(t, err, "sequential Create")
	if seq.Path != base+"/seq-0000000003" {
		t.Errorf("sequential path %q, want the fourth child's number", seq.Path)
	}
	eph, err := s.Create(ctx, base+"/eph", []byte("e"), zkclient.Ephemeral, nil)
	must(t, err, "ephemeral Create")
	if eph.Stat.EphemeralOwner != s.ID() {
		t.Errorf("ephemeral owner 0x%x, want the session 0x%x", eph.Stat.EphemeralOwner, s.ID())
	}
	if _, err := s.CreateTTL(ctx, base+"/ttl", nil, zkclient.PersistentWithTTL, nil, time.Hour); err != nil && !errors.Is(err, zkclient.ErrUnimplemented) {
		t.Errorf("TTL Create = %v", err)
	}
	must(t, s.CreateParents(ctx, base+"/c/x", zkclient.Container, nil), "CreateParents of containers")
	if _, err := s.Create(ctx, base+"/c/x", nil, zkclient.Persistent, nil); err != nil {
		t.Fatalf("Create with container parents: %v", err)
	}
	if st, _, err := s.Exists(ctx, base+"/c"); err != nil || st.NumChildren != 1 || st.EphemeralOwner != 0 {
		t.Errorf("Stat of a container parent: %+v %v", st, err)
	}

	// Reads.
	kids, _, err := s.Children(ctx, base)
	must(t, err, "Children")
	want := []string{"a", "c", "empty", "eph", "null", "seq-0000000003"}
	if _, ok, err := s.Exists(ctx, base+"/ttl"); ok && err == nil {
		want = append(want, "ttl")
		slices.Sort(want)
	}
	if !slices.Equal(kids, want) {
		t.Errorf("Children = %v, want %v (sorted)", kids, want)
	}
	if _, ok, err := s.Exists(ctx, base+"/nope"); ok || err != nil {
		t.Errorf("Exists of a missing node = %v, %v", ok, err)
	}
	if _, ok, err := s.Exists(ctx, base+"/null"); !ok || err != nil {
		t.Errorf("Exists of a node = %v, %v", ok, err)
	}
	must(t, s.Sync(ctx, base), "Sync")

	// ACLs.
	acl, st, err := s.GetACL(ctx, base+"/null")
	must(t, err, "GetACL")
	if len(acl) != 1 || acl[0].Scheme != "world" || st.Aversion != 0 {
		t.Errorf("GetACL = %+v, aversion %d", acl, st.Aversion)
	}
	ro := []zkclient.ACL{{Perms: zkclient.PermRead, Scheme: "world", ID: "anyone"}}
	if _, err := s.SetACL(ctx, base+"/null", ro, 0); err != nil {
		t.Fatalf("SetACL: %v", err)
	}
	if _, err := s.Set(ctx, base+"/null", []byte("w"), -1); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("Set on a read-only node = %v, want ErrNoAuth", err)
	}

	// Bad paths fail before any request.
	for _, bad := range []string{"", "x", "/x/", "/a//b", "/a/./b"} {
		if _, err := s.Create(ctx, bad, nil, zkclient.Persistent, nil); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("Create %q = %v, want ErrInvalidPath", bad, err)
		}
		if err := s.CreateParents(ctx, bad, zkclient.Persistent, nil); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("CreateParents %q = %v, want ErrInvalidPath", bad, err)
		}
		if _, _, err := s.Get(ctx, bad); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("Get %q = %v, want ErrInvalidPath", bad, err)
		}
		if err := s.DeleteTree(ctx, bad); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("DeleteTree %q = %v, want ErrInvalidPath", bad, err)
		}
	}

	// DeleteTree.
	if err := s.DeleteTree(ctx, base+"/nope"); !errors.Is(err, zkclient.ErrNoNode) {
		t.Errorf("DeleteTree of a missing node = %v, want ErrNoNode", err)
	}
	must(t, s.CreateParents(ctx, base+"/a/b/c/d", zkclient.Persistent, nil), "CreateParents")
	must2(t)(s.Create(ctx, base+"/a/b/c/d", nil, zkclient.Persistent, nil))
	must(t, s.DeleteTree(ctx, base+"/a"), "DeleteTree")
	if _, ok, _ := s.Exists(ctx, base+"/a"); ok {
		t.Error("DeleteTree left the node")
	}
}

// must2 fails the test when the error of a two-valued call is not nil.
func must2(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A write made conditional on holding a lock applies while it is held and
// not once the holder's node is gone; nothing held fails before sending.
func TestHeldOp(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	c := s.Client()
	res := e.path + "/resource"
	must(t, s.CreateParents(ctx, res, zkclient.Persistent, nil), "CreateParents")
	must2(t)(s.Create(ctx, res, nil, zkclient.Persistent, nil))
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	if _, err := s.Multi(ctx, m.HeldOp(), c.SetOp(res, []byte("early"), -1)); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Multi with the check of a lock not held = %v, want ErrNotHeld", err)
	}
	must(t, m.Lock(ctx), "Lock")
	if _, err := s.Multi(ctx, m.HeldOp(), c.SetOp(res, []byte("held"), -1)); err != nil {
		t.Fatalf("Multi while holding: %v", err)
	}
	// The lock is lost behind the holder's back.
	kids := e.children(e.path + "/lock")
	must(t, e.admin.Delete(e.path+"/lock/"+kids[0], -1), "delete the holder's node")
	op := m.HeldOp() // made before the holder learns of it
	results, err := s.Multi(ctx, op, c.SetOp(res, []byte("late"), -1))
	if !errors.Is(err, zkclient.ErrNoNode) {
		t.Errorf("Multi after the loss = %v, want the check's ErrNoNode", err)
	} else if len(results) != 2 || !errors.Is(results[0].Err, zkclient.ErrNoNode) {
		t.Errorf("results %+v", results)
	}
	if d, _, _ := s.Get(ctx, res); string(d) != "held" {
		t.Errorf("resource %q, want the write made while holding", d)
	}
	closed(t, m.Lost(), "Lost after the node was deleted")
	must(t, m.Unlock(ctx), "Unlock")

	rw := zkrecipes.NewRWMutex(s, e.path+"/rw")
	must(t, rw.RLock(ctx), "RLock")
	if _, err := s.Multi(ctx, rw.HeldOp(), c.SetOp(res, []byte("read"), -1)); err != nil {
		t.Errorf("Multi under a read lock: %v", err)
	}
	must(t, rw.RUnlock(ctx), "RUnlock")
	el := zkrecipes.NewElection(s, e.path+"/el", "me")
	must(t, el.Campaign(ctx), "Campaign")
	if _, err := s.Multi(ctx, el.HeldOp(), c.SetOp(res, []byte("leader"), -1)); err != nil {
		t.Errorf("Multi while leading: %v", err)
	}
	must(t, el.Resign(ctx), "Resign")
	if _, err := s.Multi(context.Background(), el.HeldOp()); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Multi after Resign = %v, want ErrNotHeld", err)
	}
}

// DeleteTree deletes children that another client adds while it works
// (a bounded number: against a writer that never stops, it cannot finish).
func TestDeleteTreeWhileChildrenAppear(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s, other := e.session(), e.session()
	root := e.path + "/tree"
	must(t, s.CreateParents(ctx, root+"/x", zkclient.Persistent, nil), "CreateParents")
	for i := range 50 {
		must2(t)(s.Create(ctx, root+"/"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil, zkclient.Persistent, nil))
	}
	stop := make(chan struct{})
	added := make(chan int)
	go func() {
		n := 0
		defer func() { added <- n }()
		for n < 30 {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := other.Create(ctx, root+"/new-", nil, zkclient.PersistentSequential, nil); err != nil {
				return // the tree is gone
			}
			n++
		}
	}()
	err := s.DeleteTree(ctx, root)
	close(stop)
	n := <-added
	must(t, err, "DeleteTree with children appearing")
	if _, ok, _ := s.Exists(ctx, root); ok {
		t.Errorf("DeleteTree left %s (%d children were added meanwhile)", root, n)
	}
	t.Logf("%d children added while deleting", n)
}
