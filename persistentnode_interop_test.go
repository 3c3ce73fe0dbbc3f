package zkrecipes_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestPersistentNodeInterop runs zkrecipes' PersistentNode beside Curator's
// on one ephemeral path, and PersistentTTLNode beside Curator's
// PersistentTtlNode on one TTL node, the Java side compiled once for both.
func TestPersistentNodeInterop(t *testing.T) {
	_, ctx, curator := interopEnv(t)
	t.Run("ephemeral", func(t *testing.T) { ephemeralNodeInterop(t, ctx, curator) })
	t.Run("ttl", func(t *testing.T) { ttlNodeInterop(t, ctx, curator) })
}

// curatorNode is a Curator contender keeping a node (recipe
// persistent-node or persistent-ttl-node).
type curatorNode struct {
	*contenderProc
	session int64 // its session's id
	passwd  []byte
	marker  string
	stop    string
}

// startCuratorNode starts a Curator contender keeping the node at path
// (with the data id) and waits until its first create is done.
func startCuratorNode(t *testing.T, ctx context.Context, curator curatorCmd, connect, recipe, path, id string, ttl time.Duration) *curatorNode {
	t.Helper()
	c := launchCuratorNode(t, ctx, curator, connect, recipe, path, id, ttl, "")
	c.created(t)
	return c
}

// launchCuratorNode starts the contender as startCuratorNode does, but
// returns once it is connected: it then waits for the start file (if
// not empty) before it starts its node.
func launchCuratorNode(t *testing.T, ctx context.Context, curator curatorCmd, connect, recipe, path, id string, ttl time.Duration, start string) *curatorNode {
	t.Helper()
	c := &curatorNode{marker: t.TempDir()}
	c.stop = filepath.Join(c.marker, "stop")
	a := interop.Args{Connect: connect, Path: path, Recipe: recipe, Marker: c.marker, ID: id, StopFile: c.stop,
		AcquireTimeout: 90 * time.Second, TTL: ttl, StartFile: start}
	c.contenderProc = startReady(t, curator(ctx, argv(t, a)...))[0]
	return c
}

// created learns the contender's session and waits until its node's first
// create is done.
func (c *curatorNode) created(t *testing.T) {
	t.Helper()
	line := c.value(t, "SESSION ")
	id, pw, _ := strings.Cut(line, " ")
	id64, err := strconv.ParseUint(id, 16, 64)
	must(t, err, "session id %q", line)
	c.session = int64(id64)
	c.passwd, err = hex.DecodeString(pw)
	must(t, err, "session password %q", line)
	c.waitLine(t, "CREATED")
}

// setData makes the contender call its node's setData, and waits until it
// has (Curator's setData only starts the write: see sees).
func (c *curatorNode) setData(t *testing.T, data string) {
	t.Helper()
	tmp := filepath.Join(c.marker, "data.tmp")
	must(t, os.WriteFile(tmp, []byte(data), 0o644), "write the data file")
	must(t, os.Rename(tmp, filepath.Join(c.marker, "data")), "rename the data file")
	c.waitLine(t, "SET "+data)
}

// sees waits until the contender's client reads data at the node, owned by
// the session owner (0: not ephemeral).
func (c *curatorNode) sees(t *testing.T, owner int64, data string) {
	t.Helper()
	c.waitLine(t, "SEES "+strconv.FormatUint(uint64(owner), 16)+" "+data)
}

// close makes the contender close its node and client, and waits until it
// has exited.
func (c *curatorNode) close(t *testing.T) {
	t.Helper()
	must(t, os.WriteFile(c.stop, nil, 0o644), "stop")
	c.wait(t)
}

// crash ends the contender's process at once, then its session, as the
// server does once the session has timed out.
func (c *curatorNode) crash(t *testing.T, addr string) {
	t.Helper()
	must(t, c.cmd.Process.Kill(), "kill the contender")
	<-c.done
	c.cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
	defer cancel()
	must(t, zktest.ExpireSession(ctx, addr, c.session, c.passwd), "expire the contender's session")
}

// owned reports the node at p as the admin reads it now: data and
// ephemeral owner (ok false if there is none).
func (e *env) owned(p string) (data string, owner int64, ok bool) {
	e.t.Helper()
	d, st, err := e.admin.Get(p)
	if err != nil {
		return "", 0, false
	}
	return string(d), st.EphemeralOwner, true
}

// nodeNow fails the test unless the node at p is, right now, owner's with data.
func (e *env) nodeNow(p, data string, owner int64, why string) {
	e.t.Helper()
	if d, o, ok := e.owned(p); !ok || d != data || o != owner {
		e.t.Errorf("%s: node %q of 0x%x (exists %v), want %q of 0x%x", why, d, o, ok, data, owner)
	}
}

// ephemeralNodeInterop: zkrecipes' and Curator's PersistentNode want the
// same ephemeral node. Neither takes the other's live node: zkrecipes waits
// (also across a reconnection, and on a renewed session) and writes nothing
// to it; the node passes to the other side only when its owner's session
// ends (Curator's process killed, zkrecipes' session expired) or its owner
// closes it (a zkrecipes node closed while Curator's has the name leaves it
// alone). Started together on a free name, whichever creates first has it.
// A node deleted behind its owner's back is made again by the side that is
// connected, with its latest data. Each side reads the other's SetData. Curator, unlike zkrecipes, writes its own data into a live node
// of another session that it finds in its way (at its start, and again
// after a reconnection) and its Close deletes the node whoever owns it;
// zkrecipes, the owner then, keeps its node through both.
func ephemeralNodeInterop(t *testing.T, ctx context.Context, curator curatorCmd) {
	e := newEnv(t)
	e.mkdirs(e.path)
	p := e.path + "/node"
	connect := strings.Join(e.servers, ",")

	// Curator first; zkrecipes waits beside it.
	c1 := startCuratorNode(t, ctx, curator, connect, "persistent-node", p, "curator-1", 0)
	e.nodeNow(p, "curator-1", c1.session, "Curator's first node")
	goProxy := zktest.NewProxyT(t, e.servers[0])
	s1 := e.sessionOn([]string{goProxy.Addr()})
	gate := make(chan struct{}) // opened once a renewed session may be made
	renew := func(ctx context.Context) (*zkrecipes.Session, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return zkrecipes.NewSession(ctx, e.servers)
	}
	var n *zkrecipes.PersistentNode
	made := async(func() (err error) {
		n, err = zkrecipes.CreatePersistentNode(ctx, s1, p, []byte("go-1"), zkclient.Ephemeral, zkrecipes.WithSessionRenewal(renew))
		return err
	})
	t.Cleanup(func() {
		if n != nil {
			n.Close(context.Background())
		}
	})
	e.waitFor("zkrecipes' watch beside Curator's", func() bool { return watchersOf(t, e.servers[0], p) == 2 })
	blocked(t, made, "CreatePersistentNode beside Curator's live node")
	e.nodeNow(p, "curator-1", c1.session, "Curator's node with zkrecipes beside it")

	c1.setData(t, "curator-1b")
	c1.sees(t, c1.session, "curator-1b") // Curator's setData writes in the background
	if d, _, err := s1.Get(ctx, p); err != nil || string(d) != "curator-1b" {
		t.Errorf("zkrecipes reads %q, %v after Curator's setData, want curator-1b", d, err)
	}

	// Deleted while zkrecipes is cut off: Curator makes it again, and
	// zkrecipes, back, still waits.
	goProxy.Refuse(true)
	goProxy.Cut()
	must(t, e.admin.Delete(p, -1), "delete Curator's node")
	e.nodeIs(p, "curator-1b", c1.session)
	goProxy.Refuse(false)
	e.waitFor("zkrecipes' watch again after its reconnection", func() bool { return watchersOf(t, e.servers[0], p) == 2 })
	blocked(t, made, "CreatePersistentNode beside Curator's node made again")
	e.nodeNow(p, "curator-1b", c1.session, "Curator's node made again, zkrecipes reconnected")

	// Curator's process dies: once its session is gone, zkrecipes has the
	// node, with its data.
	c1.crash(t, e.servers[0])
	must(t, result(t, made, "CreatePersistentNode after Curator's process died"), "CreatePersistentNode")
	e.nodeNow(p, "go-1", s1.ID(), "zkrecipes' node after Curator's session ended")

	// Curator joins zkrecipes' node: it writes its data into it (Curator's
	// way with a node in its way) but the node stays zkrecipes', which
	// keeps it; each side reads the other's writes.
	must(t, n.SetData(ctx, []byte("go-2")), "SetData")
	e.nodeNow(p, "go-2", s1.ID(), "zkrecipes' SetData")
	curatorProxy := zktest.NewProxyT(t, e.servers[0])
	c2 := startCuratorNode(t, ctx, curator, curatorProxy.Addr(), "persistent-node", p, "curator-2", 0)
	e.nodeNow(p, "curator-2", s1.ID(), "zkrecipes' node once Curator started beside it")
	must(t, n.SetData(ctx, []byte("go-3")), "SetData")
	c2.sees(t, s1.ID(), "go-3")

	// Deleted while Curator is cut off: zkrecipes makes it again, with its
	// latest data; Curator, back, writes its own into it again.
	curatorProxy.Refuse(true)
	curatorProxy.Cut()
	must(t, e.admin.Delete(p, -1), "delete zkrecipes' node")
	e.nodeIs(p, "go-3", s1.ID())
	curatorProxy.Refuse(false)
	c2.sees(t, s1.ID(), "curator-2")
	select {
	case <-n.Done():
		t.Fatalf("zkrecipes' node no longer kept: %v", n.Err())
	default:
	}

	// zkrecipes' session expires: Curator makes the node; zkrecipes, on its
	// renewed session, waits beside it and writes nothing to it.
	e.expire(s1)
	e.nodeIs(p, "curator-2", c2.session)
	close(gate)
	e.waitFor("zkrecipes' renewed session's watch", func() bool {
		return n.Session() != s1 && watchersOf(t, e.servers[0], p) == 2
	})
	must(t, n.SetData(ctx, []byte("go-4")), "SetData while Curator's node has the name")
	e.nodeNow(p, "curator-2", c2.session, "Curator's node, zkrecipes waiting on its renewed session")

	// Closed while Curator's node has the name, a zkrecipes PersistentNode
	// leaves that node alone (Curator's close, below, does not).
	var m *zkrecipes.PersistentNode
	sm := e.session()
	mMade := async(func() (err error) {
		m, err = zkrecipes.CreatePersistentNode(ctx, sm, p, []byte("go-m"), zkclient.Ephemeral)
		return err
	})
	t.Cleanup(func() {
		if m != nil {
			m.Close(context.Background())
		}
	})
	e.waitFor("a second zkrecipes node's watch", func() bool { return watchersOf(t, e.servers[0], p) == 3 })
	_, before, err := e.admin.Get(p)
	must(t, err, "get Curator's node")
	must(t, n.Close(ctx), "Close while Curator's node has the name")
	if _, after, err := e.admin.Get(p); err != nil || after.Czxid != before.Czxid || after.EphemeralOwner != c2.session {
		t.Errorf("Curator's node after zkrecipes' Close beside it: %+v, %v; want it untouched (czxid 0x%x, owner 0x%x)", after, err, before.Czxid, c2.session)
	}

	// Curator closes (deleting its node): the waiting zkrecipes node has
	// it, with its data.
	c2.close(t)
	must(t, result(t, mMade, "CreatePersistentNode after Curator's close"), "CreatePersistentNode")
	e.nodeNow(p, "go-m", sm.ID(), "zkrecipes' node after Curator closed")

	// A Curator that starts beside zkrecipes' node and closes deletes it
	// (Curator deletes the node it kept, whoever's it is): zkrecipes makes
	// it again.
	c3 := startCuratorNode(t, ctx, curator, connect, "persistent-node", p, "curator-3", 0)
	c3.sees(t, sm.ID(), "curator-3")
	must(t, m.SetData(ctx, []byte("go-5")), "SetData")
	c3.sees(t, sm.ID(), "go-5")
	_, before, err = e.admin.Get(p)
	must(t, err, "get the node")
	c3.close(t)
	e.waitFor("zkrecipes' node made again after Curator's close deleted it", func() bool {
		d, st, err := e.admin.Get(p)
		return err == nil && st.Czxid != before.Czxid && string(d) == "go-5" && st.EphemeralOwner == sm.ID()
	})

	must(t, m.Close(ctx), "Close")

	// Both start at once on the free name: whichever creates first has it,
	// and zkrecipes' CreatePersistentNode returns only if that is zkrecipes.
	// Curator takes some tens of ms from the start file to its create, so
	// zkrecipes starts after a random pause of up to 100ms: either may win.
	start := filepath.Join(t.TempDir(), "start")
	c4 := launchCuratorNode(t, ctx, curator, connect, "persistent-node", p, "curator-4", 0, start)
	s4 := e.session()
	var r *zkrecipes.PersistentNode
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")
	rMade := async(func() (err error) {
		time.Sleep(rand.N(100 * time.Millisecond))
		r, err = zkrecipes.CreatePersistentNode(ctx, s4, p, []byte("go-r"), zkclient.Ephemeral)
		return err
	})
	t.Cleanup(func() {
		if r != nil {
			r.Close(context.Background())
		}
	})
	c4.created(t)
	e.waitFor("both sides' watches after starting together", func() bool { return watchersOf(t, e.servers[0], p) == 2 })
	waiting := false
	switch _, owner, _ := e.owned(p); owner {
	case s4.ID():
		t.Log("started together: zkrecipes made the node")
		must(t, result(t, rMade, "CreatePersistentNode that made the node"), "CreatePersistentNode")
		e.nodeNow(p, "curator-4", s4.ID(), "zkrecipes' node, Curator's data written into it")
	case c4.session:
		t.Log("started together: Curator made the node")
		blocked(t, rMade, "CreatePersistentNode that lost to Curator")
		waiting = true
		e.nodeNow(p, "curator-4", c4.session, "Curator's node, zkrecipes waiting")
	default:
		t.Fatalf("started together: the node's owner is 0x%x, neither side's session", owner)
	}
	c4.close(t) // deleting the node, whoever's it is
	if waiting {
		must(t, result(t, rMade, "CreatePersistentNode after Curator's close"), "CreatePersistentNode")
	}
	e.nodeIs(p, "go-r", s4.ID())
	must(t, r.Close(ctx), "Close")
	e.empty(e.path)
}

// ttlNodeInterop: zkrecipes' PersistentTTLNode and Curator's
// PersistentTtlNode keep one TTL node (a container holding the data, and
// its TTL child "touch"): each takes over the container the other made,
// writing its data, as a persistent node is taken over; either side alone
// keeps touching the child once the other has closed; deleted, container
// and child are made again; each reads the other's data.
func ttlNodeInterop(t *testing.T, ctx context.Context, curator curatorCmd) {
	cluster := zktest.StartT(t, zktest.Options{TTL: true})
	e := newEnvOn(t, cluster.Addrs())
	e.mkdirs(e.path)
	p := e.path + "/ttl"
	touch := p + "/touch"
	const ttl = time.Second
	connect := strings.Join(e.servers, ",")
	touched := func(who string) {
		t.Helper()
		_, st, err := e.admin.Get(touch)
		must(t, err, "get the touch child")
		e.waitFor(who+" touching the child", func() bool {
			_, now, err := e.admin.Get(touch)
			return err == nil && now.Version >= st.Version+2
		})
	}
	layout := func(why string) {
		t.Helper()
		if kids := e.children(p); !slices.Equal(kids, []string{"touch"}) {
			t.Errorf("%s: children of the node %v, want [touch]", why, kids)
		}
	}

	c := startCuratorNode(t, ctx, curator, connect, "persistent-ttl-node", p, "curator-ttl", ttl)
	e.nodeNow(p, "curator-ttl", 0, "Curator's container")
	s := e.session()
	n, err := zkrecipes.CreatePersistentTTLNode(ctx, s, p, []byte("go-ttl"), ttl)
	must(t, err, "CreatePersistentTTLNode beside Curator's")
	e.nodeNow(p, "go-ttl", 0, "the container taken over by zkrecipes")
	layout("both keeping it")
	c.sees(t, 0, "go-ttl")

	// zkrecipes closes: Curator alone keeps the child touched.
	must(t, n.Close(ctx), "Close")
	touched("Curator alone")
	layout("Curator alone")

	n, err = zkrecipes.CreatePersistentTTLNode(ctx, s, p, []byte("go-ttl-2"), ttl)
	must(t, err, "CreatePersistentTTLNode beside Curator's again")
	t.Cleanup(func() { n.Close(context.Background()) })
	c.sees(t, 0, "go-ttl-2")
	c.setData(t, "curator-ttl-2")
	c.sees(t, 0, "curator-ttl-2") // Curator's setData writes in the background
	if d, _, err := s.Get(ctx, p); err != nil || string(d) != "curator-ttl-2" {
		t.Errorf("zkrecipes reads %q, %v after Curator's setData, want curator-ttl-2", d, err)
	}

	// Deleted: container and child are made again (by either side).
	_, err = e.admin.Multi(e.admin.c.DeleteOp(touch, -1), e.admin.c.DeleteOp(p, -1))
	must(t, err, "delete the touch child and the container (at once, so that no touch comes between)")
	e.waitFor("the container and its child again", func() bool {
		_, ok, _ := e.admin.Exists(touch)
		return ok
	})
	if d, _, _ := e.owned(p); d != "go-ttl-2" && d != "curator-ttl-2" {
		t.Errorf("the container made again holds %q, want one side's data", d)
	}
	layout("made again")

	// Curator closes (leaving the node, as PersistentTtlNode does):
	// zkrecipes alone keeps the child touched.
	c.close(t)
	touched("zkrecipes alone")
	layout("zkrecipes alone")
	must(t, n.Close(ctx), "Close")
}
