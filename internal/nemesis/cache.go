package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The outcomes of a tree write that certainly changed nothing.
const (
	outcomeOK       = "ok"
	outcomeNoNode   = "nonode"
	outcomeExists   = "exists"
	outcomeNotEmpty = "notempty"
)

// treeNames are the nodes the cache writer may make below the cache's
// path: four children, each with two of its own.
func treeNames(root string) []string {
	var out []string
	for _, a := range []string{"a", "b", "c", "d"} {
		out = append(out, root+"/"+a)
		for _, x := range []string{"x", "y"} {
			out = append(out, root+"/"+a+"/"+x)
		}
	}
	return out
}

// treeWriter churns the cache's subtree through client c's session until
// the heal: creates, sets and deletes of random nodes, each write with
// data of its own ("w<n>"), recorded with its outcome. It makes the
// subtree's root first (data "root"). After the heal it records that it
// stopped, and closes r.writerQuiet.
func (r *runner) treeWriter(ctx context.Context, c *client, rng *rand.Rand) {
	defer r.workers.Done()
	defer sync.OnceFunc(func() { close(r.writerQuiet) })()
	root := r.o.Base + "/" + ResCache
	names := treeNames(root)
	made := false // the root exists
	for n := 0; ctx.Err() == nil; n++ {
		if isClosed(r.healed) {
			r.h.Record(Event{Kind: KindQuiet, Client: c.id, Res: ResCache, Path: root})
			return
		}
		ref, err := c.session(ctx)
		if err != nil {
			return
		}
		cl := ref.s.Client()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if !ref.s.Connected() {
			// A write sent with no connection up fails at once, unsent:
			// wait rather than record a stream of those.
			cl.WaitConnected(wctx)
		}
		if !made {
			// The root's parents are containers, as the recipes make them.
			for _, p := range []string{"/nemesis", r.o.Base} {
				if _, err := cl.Create(wctx, p, nil, zkclient.Container, zkclient.WorldACL(zkclient.PermAll)); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
					r.fail(c.id, ref.gen, ResCache, OpTreeCreate, err)
				}
			}
			out := r.treeWrite(wctx, cl, c.id, ref.gen, OpTreeCreate, root, "root")
			made = out == outcomeOK || out == outcomeExists
			cancel()
			continue
		}
		p := names[rng.IntN(len(names))]
		data := fmt.Sprintf("w%d", n)
		switch k := rng.IntN(20); {
		case k < 8:
			r.treeWrite(wctx, cl, c.id, ref.gen, OpTreeSet, p, data)
		case k < 15:
			r.treeWrite(wctx, cl, c.id, ref.gen, OpTreeCreate, p, data)
		default:
			r.treeWrite(wctx, cl, c.id, ref.gen, OpTreeDelete, p, "")
		}
		cancel()
		sleep(ctx, time.Duration(30+rng.IntN(61))*time.Millisecond)
	}
}

// treeWrite makes one write of the cache writer and records it; it
// returns the outcome.
func (r *runner) treeWrite(ctx context.Context, cl *zkclient.Client, client int, gen int32, op, p, data string) string {
	var st zkclient.Stat
	var err error
	switch op {
	case OpTreeCreate:
		var made zkclient.Created
		made, err = cl.Create2Async(p, []byte(data), zkclient.Persistent, zkclient.WorldACL(zkclient.PermAll)).Wait(ctx)
		st = made.Stat
	case OpTreeSet:
		st, err = cl.Set(ctx, p, []byte(data), -1)
	case OpTreeDelete:
		err = cl.Delete(ctx, p, -1)
	}
	e := Event{Kind: KindTreeWrite, Client: client, Gen: gen, Res: ResCache, Op: op, Path: p, Data: data}
	switch {
	case err == nil:
		e.ErrKind, e.Accepted = outcomeOK, true
		e.Czxid, e.Mzxid, e.Version = st.Czxid, st.Mzxid, st.Version
	case errors.Is(err, zkclient.ErrNoNode):
		e.ErrKind = outcomeNoNode
	case errors.Is(err, zkclient.ErrNodeExists):
		e.ErrKind = outcomeExists
	case errors.Is(err, zkclient.ErrNotEmpty):
		e.ErrKind = outcomeNotEmpty
	default:
		// The write may or may not have been applied.
		e.ErrKind, e.Detail = Classify(err), err.Error()
		if e.ErrKind == "" {
			e.ErrKind = "unknown"
		}
		r.fail(client, gen, ResCache, op, err)
	}
	r.h.Record(e)
	return e.ErrKind
}

// cacheFollower keeps a Cache of the writer's subtree on client c's
// session, recording every event it reports, and its copy when it stops.
// A Cache stops with its session: the next is made on the client's next
// session. Once the writer is quiet after the heal, it compares the copy
// with the server's tree every 100 ms, and records both (the final
// snapshot) when they are equal, or when ProgressBound has passed; then it
// closes r.cacheFinal.
func (r *runner) cacheFollower(ctx context.Context, c *client) {
	defer r.workers.Done()
	f := &follower{r: r, c: c, root: r.o.Base + "/" + ResCache, final: sync.OnceFunc(func() { close(r.cacheFinal) })}
	defer f.final()
	for ctx.Err() == nil {
		ref, err := c.session(ctx)
		if err != nil {
			return
		}
		nctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		cache, err := zkrecipes.NewCache(nctx, ref.s, f.root)
		cancel()
		if err != nil {
			r.fail(c.id, ref.gen, ResCache, OpCacheNew, err)
			sleep(ctx, 150*time.Millisecond)
			continue
		}
		id := r.nextID()
		r.h.Record(Event{Kind: KindCacheStart, Client: c.id, Gen: ref.gen, Res: ResCache, Holding: id, Path: f.root})
		f.follow(ctx, ref.gen, id, cache)
	}
}

type follower struct {
	r         *runner
	c         *client
	root      string
	final     func()
	deadline  time.Time // of the final comparison, once the writer is quiet
	converged bool
}

// follow records cache id's events until it stops (its session is over)
// or ctx ends (then it closes the cache), and then its copy.
func (f *follower) follow(ctx context.Context, gen int32, id int32, cache *zkrecipes.Cache) {
	r := f.r
	// drain records the events queued now; it returns how many, and the
	// error that ends the stream once it is reached.
	drain := func() (int, error) {
		n := 0
		for isClosed(cache.Ready()) {
			ev, err := cache.Next(context.Background()) // ready: at once
			if err != nil {
				return n, err
			}
			r.h.Record(Event{Kind: KindCacheEvent, Client: f.c.id, Gen: gen, Res: ResCache, Holding: id, Op: ev.Type.String(),
				Path: ev.Path, Data: string(ev.Data), Czxid: ev.Stat.Czxid, Mzxid: ev.Stat.Mzxid, Version: ev.Stat.Version})
			n++
		}
		return n, nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-cache.Ready():
			if _, err = drain(); err != nil {
				break loop
			}
		case <-ctx.Done():
			break loop
		case <-tick.C:
			if f.converged || !isClosed(r.writerQuiet) {
				continue
			}
			if f.deadline.IsZero() {
				f.deadline = time.Now().Add(r.o.ProgressBound)
			}
			if err = f.compare(ctx, gen, id, cache, drain); err != nil {
				break loop
			}
		}
	}
	if err == nil || errors.Is(err, zkrecipes.ErrStreamClosed) {
		cache.Close()
		// What is queued, then the end: ErrStreamClosed, or the
		// session's end if it came first.
		if _, err := drain(); err != nil && !errors.Is(err, zkrecipes.ErrStreamClosed) {
			r.fail(f.c.id, gen, ResCache, OpCacheNext, err)
		}
	} else {
		r.fail(f.c.id, gen, ResCache, OpCacheNext, err) // the session is over
		cache.Close()
	}
	f.record(gen, id, "cache", copyOf(cache, f.root))
	r.h.Record(Event{Kind: KindSnapshot, Client: f.c.id, Gen: gen, Res: ResCache, Holding: id, Op: "end"})
}

// compare makes one comparison of the copy with the server's tree and
// records the final snapshot if they are equal or the time is up. It
// returns the error that ended the cache's stream, if drain met it.
func (f *follower) compare(ctx context.Context, gen, id int32, cache *zkrecipes.Cache, drain func() (int, error)) error {
	if _, err := drain(); err != nil {
		return err
	}
	cp := copyOf(cache, f.root)
	tree, err := f.r.serverTree(ctx, f.root)
	if err != nil {
		return nil // the admin client could not read: again at the next tick
	}
	n, err := drain()
	if err != nil {
		return err
	}
	if n > 0 {
		return nil // the copy changed meanwhile
	}
	equal := slices.Equal(cp, tree)
	if !equal && time.Now().Before(f.deadline) {
		return nil
	}
	f.record(gen, id, "cache", cp)
	f.record(gen, id, "server", tree)
	f.r.h.Record(Event{Kind: KindSnapshot, Client: f.c.id, Gen: gen, Res: ResCache, Holding: id, Op: "final", Accepted: equal})
	f.converged = true
	f.final()
	return nil
}

func (f *follower) record(gen, id int32, of string, nodes []treeNode) {
	for _, n := range nodes {
		f.r.h.Record(Event{Kind: KindCopyNode, Client: f.c.id, Gen: gen, Res: ResCache, Holding: id, Op: of,
			Path: n.path, Data: n.data, Czxid: n.czxid, Mzxid: n.mzxid, Version: n.version})
	}
}

// treeNode is one node of a tree as the checker compares them.
type treeNode struct {
	path         string
	data         string
	czxid, mzxid int64
	version      int32
}

// copyOf returns the cache's copy of the tree at root, sorted by path.
func copyOf(cache *zkrecipes.Cache, root string) []treeNode {
	var out []treeNode
	var walk func(p string)
	walk = func(p string) {
		data, st, ok := cache.Get(p)
		if !ok {
			return
		}
		out = append(out, treeNode{p, string(data), st.Czxid, st.Mzxid, st.Version})
		for _, k := range cache.Children(p) {
			walk(p + "/" + k)
		}
	}
	walk(root)
	slices.SortFunc(out, func(a, b treeNode) int { return strings.Compare(a.path, b.path) })
	return out
}

// serverTree reads the tree at root from the server, through the admin
// client after a sync (so that its member has every write), sorted by
// path.
func (r *runner) serverTree(ctx context.Context, root string) ([]treeNode, error) {
	admin, err := r.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.Sync(rctx, root); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
		return nil, err
	}
	var out []treeNode
	var walk func(p string) error
	walk = func(p string) error {
		data, st, err := admin.Get(rctx, p)
		if errors.Is(err, zkclient.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, treeNode{p, string(data), st.Czxid, st.Mzxid, st.Version})
		return eachChild(rctx, admin, p, walk)
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b treeNode) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// eachChild calls f with the path of each of p's children on the server,
// in the order the server lists them, and stops at f's first error. A p
// that is gone has no children.
func eachChild(ctx context.Context, c *zkclient.Client, p string, f func(child string) error) error {
	kids, _, err := c.Children(ctx, p)
	if errors.Is(err, zkclient.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := f(p + "/" + k); err != nil {
			return err
		}
	}
	return nil
}

// adminClient returns the runner's own client, connected straight to the
// members (no proxy), made at the first call.
func (r *runner) adminClient(ctx context.Context) (*zkclient.Client, error) {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	if r.admin != nil {
		return r.admin, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := zkclient.Connect(cctx, r.cluster.Addrs(), zkclient.WithSessionTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	r.admin = admin
	return admin, nil
}

// removeTree deletes, once everybody is done, the data the workloads keep
// on purpose (the writer's subtree, the counters, the items still queued
// and the LockingQueue's two persistent nodes), so that the leftover scan
// finds only what the recipes left behind.
func (r *runner) removeTree(ctx context.Context) error {
	admin, err := r.adminClient(ctx)
	if err != nil {
		return fmt.Errorf("nemesis: remove the workloads' data: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var remove func(p string) error
	remove = func(p string) error {
		if err := eachChild(rctx, admin, p, remove); err != nil {
			return err
		}
		if err := admin.Delete(rctx, p, -1); err != nil && !errors.Is(err, zkclient.ErrNoNode) {
			return err
		}
		return nil
	}
	for _, res := range []string{ResCache, ResAtomic, ResShared, ResQueue, ResLQueue} {
		if err := remove(r.o.Base + "/" + res); err != nil {
			return fmt.Errorf("nemesis: remove %s: %w", res, err)
		}
	}
	return nil
}
