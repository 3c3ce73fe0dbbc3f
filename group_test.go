package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// watcher follows one member's Watch stream.
type watcher struct {
	who  string
	ch   *zkrecipes.Stream[[]zkrecipes.Member]
	last string
}

// see waits until the watcher delivers exactly want.
func (w *watcher) see(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(20*time.Second))
	defer cancel()
	for w.last != want {
		ms, err := w.ch.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Watch never showed %q (last %q)", w.who, want, w.last)
		}
		if err != nil {
			t.Fatalf("%s: Watch ended while waiting for %q: %v", w.who, want, err)
		}
		w.last = render(ms)
	}
}

// TestGroupWatch: every member's Watch sees joins, leaves, data updates and
// session expiries of the others; Members agrees.
func TestGroupWatch(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/group"
	ctx := ctxTimeout(t, time.Minute)

	ss := map[string]*zkrecipes.Session{}
	gs := map[string]*zkrecipes.Group{}
	var ws []*watcher
	join := func(id string) {
		t.Helper()
		ss[id] = e.session()
		g, err := zkrecipes.JoinGroup(ctx, ss[id], path, id, []byte("v1-"+id))
		must(t, err, "%s: JoinGroup", id)
		gs[id] = g
		watch, err := g.Watch(ctx)
		must(t, err, "%s: Watch", id)
		t.Cleanup(watch.Close)
		ws = append(ws, &watcher{who: id, ch: watch})
	}
	// seeAll checks every watcher of a member still in the group.
	seeAll := func(want string) {
		t.Helper()
		for _, w := range ws {
			if _, in := gs[w.who]; in {
				w.see(t, want)
			}
		}
		for id, g := range gs {
			ms, err := g.Members(ctx)
			must(t, err, "%s: Members", id)
			if got := render(ms); got != want {
				t.Errorf("%s: Members = %q, want %q", id, got, want)
			}
			break
		}
	}

	for _, id := range []string{"a", "b", "c", "d"} {
		join(id)
	}
	seeAll("a=v1-a,b=v1-b,c=v1-c,d=v1-d")
	join("e")
	seeAll("a=v1-a,b=v1-b,c=v1-c,d=v1-d,e=v1-e")

	must(t, gs["b"].Leave(ctx), "b: Leave")
	closed(t, gs["b"].Lost(), "b's Lost after Leave")
	delete(gs, "b")
	seeAll("a=v1-a,c=v1-c,d=v1-d,e=v1-e")

	must(t, gs["a"].Update(ctx, []byte("v2-a")), "a: Update")
	seeAll("a=v2-a,c=v1-c,d=v1-d,e=v1-e")

	e.expire(ss["c"])
	closed(t, gs["c"].Lost(), "c's Lost after its session expired")
	if err := gs["c"].Update(ctx, []byte("late")); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Update after expiry = %v, want ErrSessionExpired", err)
	}
	delete(gs, "c")
	seeAll("a=v2-a,d=v1-d,e=v1-e")

	// c comes back on a new session.
	join("c")
	seeAll("a=v2-a,c=v1-c,d=v1-d,e=v1-e")

	for id, g := range gs {
		must(t, g.Leave(ctx), "%s: Leave", id)
	}
	for _, w := range ws {
		w.ch.Close()
	}
	e.empty(path)
}

// TestGroupUniqueID: an id taken by a live member cannot be taken again,
// by another session or by the same one; it is free once the member left
// or its session ended.
func TestGroupUniqueID(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/group"
	ctx := ctxTimeout(t, time.Minute)
	s1, s2 := e.session(), e.session()

	g, err := zkrecipes.JoinGroup(ctx, s1, path, "worker", []byte("one"))
	must(t, err, "first JoinGroup")
	for name, s := range map[string]*zkrecipes.Session{"another session": s2, "the same session": s1} {
		if _, err := zkrecipes.JoinGroup(ctx, s, path, "worker", []byte("two")); !errors.Is(err, zkrecipes.ErrMemberExists) {
			t.Errorf("JoinGroup of a taken id by %s = %v, want ErrMemberExists", name, err)
		}
	}
	data, _, err := e.admin.Get(path + "/worker")
	must(t, err, "get the member")
	if string(data) != "one" {
		t.Errorf("member data = %q after refused joins, want %q", data, "one")
	}
	select {
	case <-g.Lost():
		t.Error("refused joins voided the first member")
	default:
	}

	must(t, g.Leave(ctx), "Leave")
	if err := g.Leave(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("second Leave = %v, want ErrNotHeld", err)
	}
	if err := g.Update(ctx, nil); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Update after Leave = %v, want ErrNotHeld", err)
	}
	g2, err := zkrecipes.JoinGroup(ctx, s2, path, "worker", []byte("two"))
	must(t, err, "JoinGroup after the first left")

	// Deleted by an operator: Lost closes, Update refuses to write, and
	// the id is free again.
	must(t, e.admin.Delete(path+"/worker", -1), "delete the member's node")
	closed(t, g2.Lost(), "Lost after the node was deleted")
	if err := g2.Update(ctx, []byte("x")); !errors.Is(err, zkrecipes.ErrNodeLost) {
		t.Errorf("Update after the node was deleted = %v, want ErrNodeLost", err)
	}
	g3, err := zkrecipes.JoinGroup(ctx, s1, path, "worker", nil)
	must(t, err, "JoinGroup after the node was deleted")
	if err := g2.Update(ctx, []byte("x")); err == nil {
		t.Error("Update by the old member succeeded on the new member's node")
	}
	if data, _, _ := e.admin.Get(path + "/worker"); len(data) != 0 {
		t.Errorf("the new member's data was overwritten: %q", data)
	}
	must(t, g2.Leave(ctx), "old member: Leave")
	if kids := e.children(path); !slices.Equal(kids, []string{"worker"}) {
		t.Errorf("the old member's Leave touched the new member: %v", kids)
	}
	must(t, g3.Leave(ctx), "Leave")

	for _, id := range []string{"", ".", "..", "a/b", "nul\x00"} {
		if _, err := zkrecipes.JoinGroup(ctx, s1, path, id, nil); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
			t.Errorf("JoinGroup with id %q = %v, want ErrInvalidArgument", id, err)
		}
	}
	// A cancelled join leaves nothing.
	for i := range 20 {
		cctx, cancel := context.WithCancel(ctx)
		go cancel()
		if g, err := zkrecipes.JoinGroup(cctx, s1, path, fmt.Sprintf("m%d", i), nil); err == nil {
			must(t, g.Leave(ctx), "Leave")
		}
	}
	e.empty(path)
}

// TestGroupInterop puts a Curator GroupMember and a zkrecipes member in one
// group: each sees the other with its payload, a payload update and a
// member leaving, and nothing is left once both have left.
func TestGroupInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	path := e.path + "/group"
	stop := filepath.Join(t.TempDir(), "stop")
	p := startReady(t, curator(ctx, argv(t, interop.Args{
		Connect: strings.Join(e.servers, ","), Path: path, Recipe: "member",
		Marker: t.TempDir(), ID: "curator-1", StopFile: stop,
	})...))[0]
	p.waitLine(t, "MEMBERS curator-1=curator-1")

	s := e.session()
	watch, err := zkrecipes.WatchGroup(ctx, s, path)
	must(t, err, "WatchGroup")
	defer watch.Close()
	awaitMembers(t, watch, "curator-1=curator-1")
	g, err := zkrecipes.JoinGroup(ctx, s, path, "zkrecipes-1", []byte("hello"))
	must(t, err, "JoinGroup")
	awaitMembers(t, watch, "curator-1=curator-1,zkrecipes-1=hello")
	p.waitLine(t, "MEMBERS curator-1=curator-1,zkrecipes-1=hello")

	must(t, g.Update(ctx, []byte("updated")), "Update")
	p.waitLine(t, "MEMBERS curator-1=curator-1,zkrecipes-1=updated")
	must(t, g.Leave(ctx), "Leave")
	p.waitLine(t, "MEMBERS curator-1=curator-1")

	must(t, os.WriteFile(stop, nil, 0o644), "stop file")
	p.waitLine(t, "DONE curator-1")
	p.wait(t)
	awaitMembers(t, watch, "")
	e.empty(path)
}

// awaitMembers reads views of a group from watch until one reads want
// ("id=data,..." sorted by id), failing the test after a minute.
func awaitMembers(t *testing.T, watch *zkrecipes.Stream[[]zkrecipes.Member], want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(time.Minute))
	defer cancel()
	var last string
	for {
		ms, err := watch.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("group view %q after a minute, want %q", last, want)
		}
		if err != nil {
			t.Fatalf("group watch ended (%v); last view %q, want %q", err, last, want)
		}
		if last = render(ms); last == want {
			return
		}
	}
}

// A Join cancelled while its create's answer is held, and whose answer is
// then lost with the connection, fails; the member node that create made
// is deleted in the background while the session lives, so that the id is
// free again.
func TestGroupJoinAnswerLost(t *testing.T) {
	e := newEnv(t)
	path := e.path + "/g"
	e.mkdirs(path)
	p := e.proxy()
	t.Cleanup(p.Pass)
	member := e.sessionOn([]string{p.Addr()})

	fired := p.PauseRepliesOnRequest(1) // the member node's create
	jctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := async(func() error {
		_, err := zkrecipes.JoinGroup(jctx, member, path, "m", nil)
		return err
	})
	closed(t, fired, "the member node's create sent")
	e.waitFor("the member node on the server", func() bool { return len(e.children(path)) == 1 })
	blocked(t, done, "JoinGroup with its create's answer held")
	cancel()
	p.Cut() // the answer, lost with the connection
	p.Pass()
	if err := result(t, done, "JoinGroup"); !errors.Is(err, context.Canceled) {
		t.Fatalf("JoinGroup cancelled, its answer lost = %v, want the context's error", err)
	}
	e.waitFor("the lost Join's member node deleted", func() bool { return len(e.children(path)) == 0 })
	if err := member.Err(); err != nil {
		t.Fatalf("the member's session ended (%v): the node went with it, not with the clean-up", err)
	}
	ctx := ctxTimeout(t, 30*time.Second)
	g, err := zkrecipes.JoinGroup(ctx, e.session(), path, "m", nil)
	must(t, err, "another session's Join under the same id")
	must(t, g.Leave(ctx), "Leave")
}
