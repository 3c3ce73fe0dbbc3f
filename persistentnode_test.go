package zkrecipes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nodeIs waits until the node at p exists with data and, if owner is not
// zero, that ephemeral owner.
func (e *env) nodeIs(p, data string, owner int64) {
	e.t.Helper()
	e.waitFor(p+" = "+data, func() bool {
		d, st, err := e.admin.Get(p)
		return err == nil && string(d) == data && (owner == 0 || st.EphemeralOwner == owner)
	})
}

// createNode is CreatePersistentNode of an ephemeral node, failing the test
// on error and closing the node at its end.
func createNode(t *testing.T, ctx context.Context, s *zkrecipes.Session, p, data string, opts ...zkrecipes.NodeOption) *zkrecipes.PersistentNode {
	t.Helper()
	return createNodeMode(t, ctx, s, p, data, zkclient.Ephemeral, opts...)
}

// createNodeMode is createNode with a mode.
func createNodeMode(t *testing.T, ctx context.Context, s *zkrecipes.Session, p, data string, mode zkclient.CreateMode, opts ...zkrecipes.NodeOption) *zkrecipes.PersistentNode {
	t.Helper()
	n, err := zkrecipes.CreatePersistentNode(ctx, s, p, []byte(data), mode, opts...)
	must(t, err, "CreatePersistentNode %s", p)
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// TestPersistentNodeRecreated: an ephemeral PersistentNode deleted by
// another client is made again, with the latest data; while another
// session's ephemeral node holds the name, it waits, and takes the name
// once that node is gone; Close deletes it.
func TestPersistentNodeRecreated(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p := e.path + "/svc/instance"
	s := e.session()
	n := createNode(t, ctx, s, p, "v1")
	if n.Path() != p || string(n.Data()) != "v1" {
		t.Errorf("Path() = %q, Data() = %q; want %q, v1", n.Path(), n.Data(), p)
	}
	e.nodeIs(p, "v1", s.ID())

	must(t, e.admin.Delete(p, -1), "delete the node")
	e.nodeIs(p, "v1", s.ID())
	must(t, n.SetData(ctx, []byte("v2")), "SetData")
	e.nodeIs(p, "v2", s.ID())
	must(t, e.admin.Delete(p, -1), "delete the node again")
	e.nodeIs(p, "v2", s.ID())

	// Another session takes the name: the node waits for it to go,
	// recording new data meanwhile.
	_, st, err := e.admin.Get(p)
	must(t, err, "get")
	ops := []zkclient.Op{
		e.admin.c.DeleteOp(p, st.Version),
		e.admin.c.CreateOp(p, []byte("theirs"), zkclient.Ephemeral, openACL),
	}
	creates := s.Stats().Creates
	_, err = e.admin.Multi(ops...)
	must(t, err, "replace the node with the admin session's")
	e.waitFor("the node to try to make itself again", func() bool { return s.Stats().Creates > creates })
	must(t, n.SetData(ctx, []byte("v3")), "SetData while another's node holds the name")
	if d, _, err := e.admin.Get(p); err != nil || string(d) != "theirs" {
		t.Errorf("another session's node: data %q, %v; want theirs, untouched", d, err)
	}
	must(t, e.admin.Delete(p, -1), "delete the admin's node")
	e.nodeIs(p, "v3", s.ID())

	must(t, n.Close(ctx), "Close")
	closed(t, n.Done(), "Done after Close")
	if err := n.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
	if err := n.SetData(ctx, []byte("x")); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("SetData after Close = %v, want ErrNotHeld", err)
	}
	must(t, n.Close(ctx), "second Close")
	e.empty(e.path + "/svc")
}

// TestPersistentNodeReconnect: the node is deleted while the session's
// connection is down; it is made again once the client reconnects.
func TestPersistentNodeReconnect(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p := e.path + "/node"
	px := e.proxy()
	s := e.sessionOn([]string{px.Addr()}, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(20*time.Second)))
	createNode(t, ctx, s, p, "data")
	e.nodeIs(p, "data", s.ID())
	px.Refuse(true)
	px.Cut()
	e.waitFor("the session to be disconnected", func() bool { return !s.Connected() })
	must(t, e.admin.Delete(p, -1), "delete the node while disconnected")
	px.Refuse(false)
	e.nodeIs(p, "data", s.ID())
}

// TestPersistentNodeExpiry: without WithSessionRenewal the node ends with
// its session (Done, Err); with it, the node is made again, with its
// latest data, on each new session.
func TestPersistentNodeExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)

	plain := e.path + "/plain"
	s := e.session()
	n := createNode(t, ctx, s, plain, "p")
	e.expire(s)
	closed(t, n.Done(), "Done after the session expired")
	if err := n.Err(); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Err() = %v, want ErrSessionExpired", err)
	}
	if err := n.SetData(ctx, []byte("q")); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("SetData after the node stopped = %v, want ErrNotHeld", err)
	}
	e.empty(e.path + "/plain")
	must(t, n.Close(ctx), "Close")

	renewed := e.path + "/renewed"
	first := e.session()
	r := createNode(t, ctx, first, renewed, "r1", zkrecipes.WithSessionRenewal(func(ctx context.Context) (*zkrecipes.Session, error) {
		return zkrecipes.NewSession(ctx, e.servers)
	}))
	e.nodeIs(renewed, "r1", first.ID())
	e.expire(first)
	e.waitFor("a new session", func() bool { return r.Session() != first })
	must(t, r.SetData(ctx, []byte("r2")), "SetData after the renewal")
	second := r.Session()
	e.nodeIs(renewed, "r2", second.ID())

	// The renewed session expires too; SetData meanwhile is carried over.
	e.expire(second)
	must(t, r.SetData(ctx, []byte("r3")), "SetData around the second expiry")
	e.waitFor("a third session", func() bool { return r.Session() != second })
	third := r.Session()
	e.nodeIs(renewed, "r3", third.ID())
	select {
	case <-second.Done():
	default:
		t.Error("the expired session renew made is not closed")
	}
	must(t, r.Close(ctx), "Close")
	closed(t, third.Done(), "the renewed session after Close")
	e.empty(e.path + "/renewed")
}

// TestPersistentNodeCancel: a CreatePersistentNode that waits for another
// session's node of its name, and whose context ends, leaves nothing and
// touches nothing; an ephemeral node refuses a persistent one in its way.
func TestPersistentNodeCancel(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p := e.path + "/taken"
	e.mkdirs(e.path)
	_, err := e.admin.Create(p, []byte("theirs"), zkclient.Ephemeral, openACL)
	must(t, err, "create the admin's node")
	s := e.session()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = zkrecipes.CreatePersistentNode(cctx, s, p, []byte("mine"), zkclient.Ephemeral)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CreatePersistentNode on another's node = %v, want DeadlineExceeded", err)
	}
	if d, st, err := e.admin.Get(p); err != nil || string(d) != "theirs" || st.EphemeralOwner == s.ID() {
		t.Errorf("the admin's node after the cancelled create: %q, %v", d, err)
	}
	must(t, e.admin.Delete(p, -1), "delete the admin's node")

	// Cancelled before anything: nothing made.
	cctx, cancel = context.WithCancel(ctx)
	cancel()
	if _, err := zkrecipes.CreatePersistentNode(cctx, s, p, nil, zkclient.Ephemeral); !errors.Is(err, context.Canceled) {
		t.Errorf("CreatePersistentNode with a cancelled context = %v, want Canceled", err)
	}
	e.empty(e.path)

	_, err = e.admin.Create(p, nil, zkclient.Persistent, openACL)
	must(t, err, "create a persistent node")
	if _, err := zkrecipes.CreatePersistentNode(ctx, s, p, nil, zkclient.Ephemeral); !errors.Is(err, zkclient.ErrNodeExists) {
		t.Errorf("ephemeral CreatePersistentNode on a persistent node = %v, want ErrNodeExists", err)
	}
	must(t, e.admin.Delete(p, -1), "delete the persistent node")
	if _, err := zkrecipes.CreatePersistentNode(ctx, s, "bad", nil, zkclient.Ephemeral); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("CreatePersistentNode on a bad path = %v, want ErrInvalidPath", err)
	}
	if _, err := zkrecipes.CreatePersistentNode(ctx, s, p, nil, zkclient.PersistentWithTTL); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("CreatePersistentNode with a TTL mode = %v, want ErrInvalidArgument", err)
	}
	e.empty(e.path)
}

// TestPersistentNodeReplacedBeforeWatch: a persistent node that another
// client replaces with its own (delete and create in one multi) between the
// keeper's create and its watch is not taken for the keeper's: the keeper
// sees a node made at another zxid and takes it over (its data set back).
// Seen under load on the embedded server in TestPersistentNodeModes.
func TestPersistentNodeReplacedBeforeWatch(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	p := e.path + "/persistent"
	e.mkdirs(e.path)
	n := createNodeMode(t, ctx, s, p, "new", zkclient.Persistent)
	var once sync.Once
	replaced := make(chan error, 1)
	zkrecipes.SetNodeBeforeWatch(n, func() {
		once.Do(func() {
			_, err := e.admin.Multi(e.admin.c.DeleteOp(p, -1),
				e.admin.c.CreateOp(p, []byte("theirs"), zkclient.Persistent, openACL))
			replaced <- err
		})
	})
	must(t, e.admin.Delete(p, -1), "delete the persistent node")
	select {
	case err := <-replaced:
		must(t, err, "replace the node before the keeper's watch")
	case <-ctx.Done():
		t.Fatal("the keeper never made the node again")
	}
	e.nodeIs(p, "new", 0)
	must(t, n.Close(ctx), "Close")
	if _, ok, _ := e.admin.Exists(p); ok {
		t.Error("Close left the persistent node")
	}
	e.empty(e.path)
}

// TestPersistentNodeModes: a persistent node takes over an existing one
// (setting its data), outlives its session and is deleted by Close; a
// sequential node is re-created under the name it first got.
func TestPersistentNodeModes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()

	p := e.path + "/persistent"
	e.mkdirs(e.path)
	_, err := e.admin.Create(p, []byte("old"), zkclient.Persistent, openACL)
	must(t, err, "create the existing node")
	n := createNodeMode(t, ctx, s, p, "new", zkclient.Persistent)
	e.nodeIs(p, "new", 0)
	must(t, e.admin.Delete(p, -1), "delete the persistent node")
	e.nodeIs(p, "new", 0)
	if _, st, _ := e.admin.Get(p); st.EphemeralOwner != 0 {
		t.Errorf("persistent node has ephemeral owner 0x%x", st.EphemeralOwner)
	}
	// Replaced at once by another's persistent node: taken over again.
	_, err = e.admin.Multi(e.admin.c.DeleteOp(p, -1),
		e.admin.c.CreateOp(p, []byte("theirs"), zkclient.Persistent, openACL))
	must(t, err, "replace the persistent node")
	e.nodeIs(p, "new", 0)
	must(t, n.Close(ctx), "Close")
	if _, ok, _ := e.admin.Exists(p); ok {
		t.Error("Close left the persistent node")
	}

	dir := e.path + "/seq"
	q := createNodeMode(t, ctx, s, dir+"/member-", "m", zkclient.EphemeralSequential)
	name := q.Path()
	if !strings.HasPrefix(name, dir+"/_c_") || !strings.Contains(name, "-member-") || len(name) != len(dir+"/_c_")+36+len("-member-")+10 {
		t.Errorf("sequential node's path %q, want %s/_c_<uuid>-member-<seq>", name, dir)
	}
	e.nodeIs(name, "m", s.ID())
	must(t, e.admin.Delete(name, -1), "delete the sequential node")
	e.nodeIs(name, "m", s.ID())
	if kids := e.children(dir); len(kids) != 1 {
		t.Errorf("nodes under %s: %v, want the one re-created", dir, kids)
	}
	must(t, q.Close(ctx), "Close")
	e.empty(dir)

	// An ephemeral node replaced by a persistent one stops keeping.
	eph := e.path + "/eph"
	r := createNode(t, ctx, s, eph, "r")
	_, err = e.admin.Multi(e.admin.c.DeleteOp(eph, -1),
		e.admin.c.CreateOp(eph, []byte("theirs"), zkclient.Persistent, openACL))
	must(t, err, "replace the ephemeral node by a persistent one")
	closed(t, r.Done(), "Done of an ephemeral node replaced by a persistent one")
	if err := r.Err(); !errors.Is(err, zkclient.ErrNodeExists) {
		t.Errorf("Err() = %v, want ErrNodeExists", err)
	}
	must(t, r.Close(ctx), "Close")
	if d, _, err := e.admin.Get(eph); err != nil || string(d) != "theirs" {
		t.Errorf("the persistent node after Close: %q, %v; want it untouched", d, err)
	}
}

// TestPersistentTTLNode: on a server with TTL nodes, the node is a
// container holding the data with a "touch" child that is written every
// half TTL (never the node itself, which fires no watch); deleted, both are
// made again; Close leaves them to expire. A server without TTL nodes
// refuses it, leaving nothing.
func TestPersistentTTLNode(t *testing.T) {
	ctx := ctxTimeout(t, time.Minute)
	plain := newEnv(t)
	if _, err := zkrecipes.CreatePersistentTTLNode(ctx, plain.session(), plain.path+"/ttl", nil, time.Second); !errors.Is(err, zkclient.ErrUnimplemented) {
		t.Errorf("CreatePersistentTTLNode on a server without TTLs = %v, want ErrUnimplemented", err)
	}
	plain.empty(plain.path)

	cluster := zktest.StartT(t, zktest.Options{TTL: true})
	e := newEnvOn(t, cluster.Addrs())
	p := e.path + "/ttl"
	touch := p + "/touch"
	s := e.session()
	n, err := zkrecipes.CreatePersistentTTLNode(ctx, s, p, []byte("d"), 400*time.Millisecond)
	must(t, err, "CreatePersistentTTLNode")
	t.Cleanup(func() { n.Close(context.Background()) })
	e.nodeIs(p, "d", 0)
	if kids := e.children(p); len(kids) != 1 || kids[0] != "touch" {
		t.Fatalf("children of the node: %v, want [touch]", kids)
	}
	e.waitFor("the touch child to be written twice", func() bool {
		_, st, err := e.admin.Get(touch)
		return err == nil && st.Version >= 2
	})
	if _, st, err := e.admin.Get(p); err != nil || st.Version != 0 || st.EphemeralOwner != 0 {
		t.Errorf("the node itself: %+v, %v; want never written, not ephemeral", st, err)
	}

	must(t, e.admin.Delete(touch, -1), "delete the touch child")
	must(t, e.admin.Delete(p, -1), "delete the node")
	e.nodeIs(p, "d", 0)
	e.waitFor("the touch child again", func() bool { _, ok, _ := e.admin.Exists(touch); return ok })
	must(t, n.SetData(ctx, []byte("e")), "SetData")
	e.nodeIs(p, "e", 0)

	must(t, n.Close(ctx), "Close")
	closed(t, n.Done(), "Done after Close")
	if _, ok, _ := e.admin.Exists(touch); !ok {
		t.Error("Close deleted the touch child instead of leaving it to expire")
	}
}
