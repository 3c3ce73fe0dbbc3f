package zkrecipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/stream"
	"github.com/zkrecipes/zkrecipes/internal/zkpath"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// CacheEventType is the kind of a CacheEvent.
type CacheEventType int

// Cache event types.
const (
	CacheCreated     CacheEventType = iota + 1 // the node appeared in the copy
	CacheChanged                               // its data changed (a newer version)
	CacheDeleted                               // it left the copy
	CacheInitialized                           // the initial load is complete
)

func (t CacheEventType) String() string {
	switch t {
	case CacheCreated:
		return "created"
	case CacheChanged:
		return "changed"
	case CacheDeleted:
		return "deleted"
	case CacheInitialized:
		return "initialized"
	}
	return fmt.Sprintf("CacheEventType(%d)", int(t))
}

// CacheEvent is one change of a Cache's copy. Data and Stat are the node's
// after the change; for CacheDeleted, the last the copy held. Data is
// shared with the copy: do not modify it. CacheInitialized carries the
// cache's path only.
type CacheEvent struct {
	Type CacheEventType
	Path string
	Data []byte
	Stat zkclient.Stat
}

// CacheOption configures a Cache.
type CacheOption func(*cacheConfig)

type cacheConfig struct {
	single     bool
	noEvents   bool
	beforeRead func(path string) // tests: runs before the cache sends a read of path
	beforeList func(path string) // tests: runs between a pass's getData of path and its listing
}

// WithSingleNode makes a Cache keep the node at its path only, not the
// nodes below it (as Curator's SINGLE_NODE_CACHE). Its watch is then a
// persistent watch of that node, not a recursive one.
func WithSingleNode() CacheOption { return func(c *cacheConfig) { c.single = true } }

// WithoutEvents makes a Cache keep no event stream, for readers that only
// call Get and Children: the events of a Cache nobody reads are otherwise
// kept without bound. Next then fails at once.
func WithoutEvents() CacheOption { return func(c *cacheConfig) { c.noEvents = true } }

// Cache is a local copy of a ZooKeeper node and, by default, of every node
// below it (as Apache Curator's CuratorCache), kept up to date over one
// persistent recursive watch. Get and Children read the copy without a
// request; Next returns the copy's changes, in the order they were
// applied, none dropped. It needs ZooKeeper 3.6 or later (addWatch): there
// is no fallback to one-shot watches, and NewCache fails on older servers
// (with an error wrapping zkclient.ErrUnimplemented where the server
// answers so).
//
// What a reader can assume:
//
//   - Convergence. Once the tree stops changing and the session is
//     connected, the copy becomes equal to the server's tree: the same
//     nodes, each with its data, Czxid, Mzxid and Version.
//   - The stream is the copy. The events, applied in order to an empty
//     tree, give exactly what Get and Children answer at that point: first
//     one CacheCreated per node of the initial tree (parents first; a node
//     gone or changed while the load read the tree is reported as the load
//     ended), then CacheInitialized, then every change. A change and its event are made
//     under one lock, so a Get never shows a state whose event is not yet
//     queued.
//   - Per node, versions only move forward and are real. Every Created,
//     Changed and Deleted event reports a state that node really had on the
//     server, read after the previous one: CacheChanged keeps the Czxid and
//     has a higher Mzxid; a node deleted and made again (a higher Czxid)
//     reads as CacheDeleted then CacheCreated. The same state is never
//     reported twice.
//   - The copy is always a tree. A node is reported created only while its
//     parent is in the copy, and deleted only once its children are gone
//     from it.
//   - Nothing the server still shows is missed. The cache reads a node
//     again after each watch event for it and, after every reconnection
//     (the server reports no changes made while a persistent watch's
//     connection was down), reads the whole tree again and reports the
//     differences. So a node's state that lasts until the cache reads it is
//     reported, exactly once; in particular a node changed once between two
//     quiet moments gives exactly one event, also when the change was made
//     while the cache was disconnected.
//
// What a reader cannot assume:
//
//   - Freshness. The copy lags the server; a write made through the same
//     Session is not necessarily in the copy when the write returns.
//   - Every intermediate version. Changes that follow each other faster
//     than the cache reads them (or while it is disconnected) are merged:
//     only the version the cache reads is reported. A node created and
//     deleted in between is not reported at all.
//   - One moment across nodes. The copy is not a snapshot: two nodes may
//     show the server at different moments (a later change of one node may
//     appear before an earlier change of another).
//   - Children metadata in Stat. NumChildren, Cversion and Pzxid (and
//     Aversion) are those read with the node's last reported version; a
//     persistent recursive watch reports no child changes to the parent.
//     Use Children.
//
// When the Session ends (expired, or closed), the Cache stops: Done is
// closed, Err says why (an error wrapping ErrSessionExpired or
// ErrSessionClosed), Next returns the queued events and then that error,
// and Get and Children keep answering from the last copy. A Cache never
// moves to another session by itself: make a new Session and a new Cache.
//
// Nodes the session may not read (ACLs) are left out, with what lies below
// them. On ZooKeeper 3.8 a one-shot watch that the same session sets on
// the cache's path itself replaces the persistent watch on the server
// (fixed in 3.9): do not also watch that path one-shot, nor run a recipe on
// it, on the same Session.
//
// Cost: one watch on the server, one goroutine, and per node its path,
// data, Stat and an entry in its parent's set of children. The initial load
// (and each resynchronization) lists and reads every node, pipelined, about
// two requests per node; afterwards each batch of watch events costs one
// round trip. A Cache is safe for concurrent use; Next has one reader.
type Cache struct {
	s      *Session
	cl     *zkclient.Client
	root   string
	single bool
	events *stream.Queue[CacheEvent] // nil WithoutEvents
	w      *zkclient.PersistentWatch
	states *zkclient.StateStream

	mu    sync.RWMutex
	nodes map[string]*cachedNode
	err   error
	done  chan struct{}
	// loading is true during the initial load, whose events are not
	// queued: a node read and then found gone (or changed) within the load
	// would otherwise be reported deleted (or changed) before
	// CacheInitialized. emitInitialized queues the copy as loaded.
	loading bool

	before    func(string) // tests: see cacheConfig.beforeRead
	beforeLs  func(string) // tests: see cacheConfig.beforeList
	resync    bool         // the loop's: the tree must be read again
	passes    atomic.Int64 // reads of the whole tree done (the initial load included)
	deferred  atomic.Int64 // node reads left for the node's coming event
	cancel    context.CancelFunc
	stopped   chan struct{} // the loop returned
	closeOnce sync.Once
	closeErr  error
}

type cachedNode struct {
	data []byte
	stat zkclient.Stat
	kids map[string]struct{} // names of the children in the copy; nil if none
}

// NewCache watches path (recursively unless WithSingleNode), then reads
// the node and, by default, its whole subtree, and returns once that
// initial copy is loaded (CacheInitialized is then queued), or with an
// error when ctx ends first, the path is invalid, or the session is over.
// The path need not exist: the copy is then empty until it is created.
// Close the Cache when done with it.
func NewCache(ctx context.Context, s *Session, path string, opts ...CacheOption) (*Cache, error) {
	if err := zkpath.Check(path); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidPath, path, err)
	}
	var cfg cacheConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &Cache{
		s:        s,
		cl:       s.c,
		root:     path,
		single:   cfg.single,
		before:   cfg.beforeRead,
		beforeLs: cfg.beforeList,
		nodes:    make(map[string]*cachedNode),
		loading:  true,
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	if !cfg.noEvents {
		c.events = stream.New[CacheEvent]()
	}
	// The state stream first, then the watch, then the reads: nothing that
	// happens after the watch is set can be missed.
	c.states = c.cl.States()
	err := retry(ctx, s, func() (err error) {
		c.w, err = c.cl.AddWatch(ctx, path, !c.single)
		return err
	})
	if err != nil {
		c.states.Close()
		return nil, errorf("cache %s: %w", path, err)
	}
	for {
		err = c.sync(ctx)
		if errors.Is(err, ErrConnectionLoss) {
			if err = s.awaitUp(ctx); err == nil {
				continue
			}
		}
		break
	}
	if err != nil {
		cctx, cancel := s.cleanupContext(ctx)
		c.w.Remove(cctx)
		cancel()
		c.states.Close()
		return nil, errorf("cache %s: initial load: %w", path, err)
	}
	c.emitInitialized()
	loop, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(loop)
	return c, nil
}

// Path returns the path of the cached node.
func (c *Cache) Path() string { return c.root }

// Get returns the copy's data and Stat of the node at path, and whether
// the copy holds it. The data is shared with the copy: do not modify it.
func (c *Cache) Get(path string) (data []byte, stat zkclient.Stat, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[path]
	if n == nil {
		return nil, zkclient.Stat{}, false
	}
	return n.data, n.stat, true
}

// Children returns the names of the children of path in the copy, sorted;
// nil if the copy does not hold path (or, WithSingleNode, always).
func (c *Cache) Children(path string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[path]
	if n == nil {
		return nil
	}
	out := make([]string, 0, len(n.kids))
	for k := range n.kids {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Len returns the number of nodes in the copy.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
}

// Next returns the next change of the copy, waiting while ctx allows.
// Unlike a [Stream]'s, which merges the changes a slow reader has not seen,
// a Cache's events are queued without bound until read. Once the Cache has
// stopped (Close, or the session's end) Next returns what is queued, then,
// at every call, the reason (see [Cache.Err]). With [WithoutEvents] it
// fails at once with [ErrInvalidArgument].
func (c *Cache) Next(ctx context.Context) (CacheEvent, error) {
	if c.events == nil {
		return CacheEvent{}, errorf("cache %s: %w: made WithoutEvents", c.root, ErrInvalidArgument)
	}
	return c.events.Next(ctx)
}

// Ready returns a channel that is closed when Next can return at once.
func (c *Cache) Ready() <-chan struct{} {
	if c.events == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.events.Ready()
}

// Done returns a channel that is closed when the Cache stops following the
// server: Close was called or the session is over.
func (c *Cache) Done() <-chan struct{} { return c.done }

// Err returns nil while the Cache follows the server, then why it stopped:
// [ErrStreamClosed] (Close was called), or an error wrapping
// [ErrSessionExpired] or [ErrSessionClosed].
func (c *Cache) Err() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.err
}

// Close stops the Cache and removes its watch from the server (waiting for
// the answer for at most the session timeout). The copy stays readable.
// Calling Close again returns nil.
func (c *Cache) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.cancel()
		<-c.stopped
		c.finish(ErrStreamClosed)
		ctx, cancel := c.s.cleanupContext(context.Background())
		defer cancel()
		if err := c.w.Remove(ctx); err != nil {
			c.closeErr = errorf("cache %s: remove watch: %w", c.root, err)
		}
		c.states.Close()
	})
	if !first {
		return nil
	}
	return c.closeErr
}

// finish records why the Cache stopped (the first reason stays) and ends
// the event stream with it.
func (c *Cache) finish(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	err = c.err
	c.mu.Unlock()
	if c.events != nil {
		c.events.Close(err)
	}
}

// run follows the watch and the session until ctx ends or the session is
// over.
func (c *Cache) run(ctx context.Context) {
	defer close(c.stopped)
	for {
		var err error
		switch {
		case c.resync:
			start := time.Now()
			if err = c.sync(ctx); err == nil {
				c.resync = false
				if o := c.s.obs; o != nil && o.Resynced != nil {
					o.Resynced(ResyncEvent{Path: c.root, Nodes: c.Len(), Took: time.Since(start)})
				}
			}
		default:
			select {
			case <-c.w.Ready():
				err = c.batch(ctx)
			case <-c.states.Ready():
				err = c.state(ctx)
			case <-ctx.Done():
				return
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, ErrConnectionLoss) {
			// What was lost with the connection (events, answers) is
			// read again once it is back.
			c.resync = true
			err = c.s.awaitUp(ctx)
		}
		if err != nil {
			if ctx.Err() == nil {
				c.finish(errorf("cache %s: %w", c.root, err))
			}
			return
		}
	}
}

// state handles one state change of the session.
func (c *Cache) state(ctx context.Context) error {
	ev, err := c.states.Next(ctx)
	if err != nil {
		return err
	}
	switch {
	case ev.State.Final():
		return ev.Err
	case ev.State == zkclient.StateSuspended:
		// The server restores the watch on reconnection but does not
		// report what changed meanwhile: the tree is read again, and
		// that read's requests are answered on the new connection, so
		// it covers the reconnection. Reconnected itself asks for
		// nothing: every one follows a Suspended (seen here, or taken by
		// a read's drainStates, whose read then fails or runs after
		// the reconnection), and reading again on it read the tree
		// twice after one cut.
		c.resync = true
	}
	return nil
}

// drainStates takes the state changes already queued before reading the
// whole tree: the read covers them.
func (c *Cache) drainStates(ctx context.Context) error {
	for {
		select {
		case <-c.states.Ready():
		default:
			return nil
		}
		ev, err := c.states.Next(ctx)
		if err != nil {
			return err
		}
		if ev.State.Final() {
			return ev.Err
		}
	}
}

// fatal reports whether err stops a read pass (the connection or the
// session is gone, or ctx ended), as opposed to one node's problem.
func (c *Cache) fatal(ctx context.Context, err error) bool {
	return errors.Is(err, ErrConnectionLoss) || c.cl.Err() != nil || ctx.Err() != nil
}

// readFailed sorts out the error of a pass's read of path (of its node or
// of its children, what), nil if none: a node gone is removed from the copy,
// an error that stops the pass (see fatal) is returned, and any other
// leaves the node out, logged. skip reports that the pass goes on without
// this read.
func (c *Cache) readFailed(ctx context.Context, path string, err error, what string) (skip bool, fatal error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, zkclient.ErrNoNode):
		c.remove(path)
	case c.fatal(ctx, err):
		return true, err
	default:
		c.s.log.Warn("zkrecipes: cache: "+what+" left out", "path", path, "err", err)
	}
	return true, nil
}

// sync reads the whole tree (breadth first, about window nodes in flight)
// and applies the differences to the copy.
func (c *Cache) sync(ctx context.Context) error {
	if err := c.drainStates(ctx); err != nil {
		return err
	}
	const window = 512
	type visit struct {
		path        string
		parentCzxid int64 // the incarnation of the parent whose listing named it
		listed      int64 // the zxid of that listing's reply
		get         *zkclient.Call[zkclient.Node]
		list        *zkclient.Call[zkclient.Listing]
	}
	todo := []visit{{path: c.root}}
	var flight []visit
	for len(todo) > 0 || len(flight) > 0 {
		for len(flight) < window && len(todo) > 0 {
			v := todo[0]
			todo = todo[1:]
			if c.before != nil {
				c.before(v.path)
			}
			c.s.stats.reads.Add(1)
			v.get = c.cl.GetAsync(v.path)
			if !c.single {
				if c.beforeLs != nil {
					c.beforeLs(v.path)
				}
				c.s.stats.listings.Add(1)
				v.list = c.cl.ChildrenAsync(v.path)
			}
			flight = append(flight, v)
		}
		v := flight[0]
		flight = flight[1:]

		n, err := v.get.Wait(ctx)
		if skip, err := c.readFailed(ctx, v.path, err, "node"); skip {
			if err != nil {
				return err
			}
			continue
		}
		if v.path != c.root && !c.placeable(v.path, v.parentCzxid, v.listed, n.Stat.Czxid) {
			c.deferred.Add(1)
			continue // made after this pass began: its event will bring it
		}
		c.put(v.path, n.Data, n.Stat)
		if c.single {
			continue
		}
		l, err := v.list.Wait(ctx)
		if skip, err := c.readFailed(ctx, v.path, err, "children"); skip {
			if err != nil {
				return err
			}
			continue
		}
		if _, st, ok := c.Get(v.path); !ok || st.Czxid != l.Stat.Czxid {
			continue // made again between the two reads: its events will tell
		}
		c.prune(v.path, l.Names)
		for _, name := range l.Names {
			todo = append(todo, visit{path: zkpath.Join(v.path, name), parentCzxid: l.Stat.Czxid, listed: v.list.Zxid()})
		}
	}
	c.passes.Add(1)
	return nil
}

// batch applies the watch events queued now (up to a bound): it reads each
// node named again, with the ancestors it needs, in one round trip.
func (c *Cache) batch(ctx context.Context) error {
	const most = 1024
	named := make(map[string]bool)
	for len(named) < most {
		select {
		case <-c.w.Ready():
		default:
			return c.probe(ctx, named)
		}
		ev, err := c.w.Next(ctx)
		if err != nil {
			return err // the session is over
		}
		switch ev.Type {
		case zkclient.EventNodeCreated, zkclient.EventNodeDeleted, zkclient.EventNodeDataChanged:
			if c.covers(ev.Path) {
				named[ev.Path] = true
			}
		}
	}
	return c.probe(ctx, named)
}

// probe reads the named nodes (getData) and their ancestors up to the
// cache's path (exists, for their incarnation), parents before children,
// all requests sent before the first answer is awaited; so every read
// comes after every event of the batch.
func (c *Cache) probe(ctx context.Context, named map[string]bool) error {
	if len(named) == 0 {
		return nil
	}
	all := make(map[string]bool, len(named))
	for p := range named {
		for q := p; !all[q]; q = zkpath.Parent(q) {
			all[q] = true
			if q == c.root {
				break
			}
		}
	}
	order := make([]string, 0, len(all))
	for p := range all {
		order = append(order, p)
	}
	slices.SortFunc(order, parentsFirst)
	type read struct {
		get  *zkclient.Call[zkclient.Node]
		stat *zkclient.Call[zkclient.Stat]
	}
	reads := make([]read, len(order))
	for i, p := range order {
		if c.before != nil {
			c.before(p)
		}
		c.s.stats.reads.Add(1)
		if named[p] {
			reads[i].get = c.cl.GetAsync(p)
		} else {
			reads[i].stat = c.cl.ExistsAsync(p)
		}
	}
	type seen struct {
		czxid, zxid int64
	}
	found := make(map[string]seen, len(order)) // nodes read present
	for i, p := range order {
		var n zkclient.Node
		var err error
		var zxid int64
		if r := reads[i]; r.get != nil {
			n, err = r.get.Wait(ctx)
			zxid = r.get.Zxid()
		} else {
			n.Stat, err = r.stat.Wait(ctx)
			zxid = r.stat.Zxid()
		}
		switch {
		case errors.Is(err, zkclient.ErrNoNode):
			c.remove(p)
			continue
		case err != nil && c.fatal(ctx, err):
			return err
		case err != nil:
			c.s.log.Warn("zkrecipes: cache: node left out", "path", p, "err", err)
			continue
		}
		found[p] = seen{n.Stat.Czxid, zxid}
		if p != c.root {
			up, ok := found[zkpath.Parent(p)]
			if !ok || !c.placeable(p, up.czxid, up.zxid, n.Stat.Czxid) {
				c.deferred.Add(1)
				continue // its events are still to come (see placeable)
			}
		}
		if named[p] {
			c.put(p, n.Data, n.Stat)
		}
	}
	return nil
}

// parentsFirst orders paths by depth, then by name: every node after its
// parent.
func parentsFirst(a, b string) int {
	if d := pathDepth(a) - pathDepth(b); d != 0 {
		return d
	}
	return strings.Compare(a, b)
}

// pathDepth returns the number of segments of p.
func pathDepth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// placeable reports whether a node read with incarnation czxid can go
// under the parent the copy holds, given the parent's incarnation
// parentCzxid as read just before it, answered at zxid.
//
// A node read is accepted into the copy only if it can be placed under the
// node the copy holds as its parent: the parent's incarnation (Czxid) read
// just before it (its listing in a pass over the tree, its exists or
// getData in a batch) must be the one the copy holds, and the node must be
// no younger than that read (Czxid <= the zxid of that reply), so that it
// already existed, under that parent, when the parent was read. A node
// that fails this, or the parent incarnation it belongs to, was made after
// what the copy has taken in: after the watch was set and after the events
// taken so far, so its NodeCreated event is still to come and reads it
// again under the right parent; or it was made while the connection was
// down, and a pass over the whole tree follows. Deferring it keeps the
// copy a tree, each child under the incarnation of its parent it belongs
// to.
func (c *Cache) placeable(path string, parentCzxid, zxid, czxid int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	up := c.nodes[zkpath.Parent(path)]
	return up != nil && up.stat.Czxid == parentCzxid && czxid <= zxid
}

// put applies a read of path: a node new to the copy, a newer version, or
// a new incarnation (which replaces the old one and what was below it).
// An older or equal version changes nothing.
func (c *Cache) put(path string, data []byte, st zkclient.Stat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[path]; n != nil {
		switch {
		case st.Czxid < n.stat.Czxid:
			return
		case st.Czxid == n.stat.Czxid:
			if st.Mzxid > n.stat.Mzxid {
				n.data, n.stat = data, st
				c.emitLocked(CacheEvent{Type: CacheChanged, Path: path, Data: data, Stat: st})
			}
			return
		}
		c.removeLocked(path)
	}
	var up *cachedNode
	if path != c.root {
		if up = c.nodes[zkpath.Parent(path)]; up == nil {
			return // never: reads are placed under a parent first
		}
	}
	c.nodes[path] = &cachedNode{data: data, stat: st}
	if up != nil {
		if up.kids == nil {
			up.kids = make(map[string]struct{})
		}
		up.kids[path[strings.LastIndexByte(path, '/')+1:]] = struct{}{}
	}
	c.emitLocked(CacheEvent{Type: CacheCreated, Path: path, Data: data, Stat: st})
}

// prune removes from the copy the children of path that a listing no
// longer names.
func (c *Cache) prune(path string, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[path]
	if n == nil || len(n.kids) == 0 {
		return
	}
	keep := make(map[string]bool, len(names))
	for _, k := range names {
		keep[k] = true
	}
	for k := range n.kids {
		if !keep[k] {
			c.removeLocked(zkpath.Join(path, k))
		}
	}
}

// remove takes path and everything below it out of the copy.
func (c *Cache) remove(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(path)
}

func (c *Cache) removeLocked(path string) {
	n := c.nodes[path]
	if n == nil {
		return
	}
	for k := range n.kids {
		c.removeLocked(zkpath.Join(path, k))
	}
	delete(c.nodes, path)
	if up := c.nodes[zkpath.Parent(path)]; up != nil && path != c.root {
		delete(up.kids, path[strings.LastIndexByte(path, '/')+1:])
	}
	c.emitLocked(CacheEvent{Type: CacheDeleted, Path: path, Data: n.data, Stat: n.stat})
}

func (c *Cache) emitLocked(ev CacheEvent) {
	if c.events != nil && !c.loading {
		c.events.Push(ev)
	}
}

// emitInitialized ends the initial load: it queues one CacheCreated per
// node of the copy (see parentsFirst), then CacheInitialized.
func (c *Cache) emitInitialized() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading = false
	if c.events == nil {
		return
	}
	paths := make([]string, 0, len(c.nodes))
	for p := range c.nodes {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, parentsFirst)
	for _, p := range paths {
		n := c.nodes[p]
		c.emitLocked(CacheEvent{Type: CacheCreated, Path: p, Data: n.data, Stat: n.stat})
	}
	c.emitLocked(CacheEvent{Type: CacheInitialized, Path: c.root})
}

// covers reports whether the copy would hold the node at p.
func (c *Cache) covers(p string) bool {
	switch {
	case p == c.root:
		return true
	case c.single:
		return false
	case c.root == "/":
		return true
	}
	return strings.HasPrefix(p, c.root+"/")
}
