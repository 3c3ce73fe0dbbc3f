package zkclient

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zkrecipes/zkrecipes/internal/jute"
	"github.com/zkrecipes/zkrecipes/internal/stream"
)

// ErrWatchRemoved is the Err of the EventNotWatching event of a persistent
// watch that was removed.
var ErrWatchRemoved = errors.New("zookeeper: watch removed")

// watchKind is what set a watch, and so which events fire it.
type watchKind uint8

const (
	kindData       watchKind = iota // getData, or exists on a node that exists
	kindExist                       // exists on a node that does not exist
	kindChild                       // getChildren
	kindPersistent                  // addWatch, this node only
	kindRecursive                   // addWatch, this node and below
)

type watchKey struct {
	path string // as the server knows it (with the chroot)
	kind watchKind
}

// watchTable is the client's registry of watches: several registrants may
// share one watch on the server (which keeps at most one per path and kind
// per connection); each gets every event once.
type watchTable struct {
	c         *Client
	mu        sync.Mutex
	one       map[watchKey][]*Watch
	pers      map[watchKey][]*PersistentWatch
	inflight  map[string]int  // requests that will set a watch on a path, not answered yet
	stale     map[string]bool // paths whose server watch outlived its registrants (removal deferred)
	recursive int
	err       error // the session's end: no more registrations
}

func (t *watchTable) init(c *Client) {
	t.c = c
	t.one = map[watchKey][]*Watch{}
	t.pers = map[watchKey][]*PersistentWatch{}
	t.inflight = map[string]int{}
	t.stale = map[string]bool{}
}

// Watch is a one-shot watch: its channel receives exactly one Event, the
// first change of the node after the watch was set (also one made while
// the client was reconnecting: the server reports it when the watch is
// restored), or an EventNotWatching event when the session ends first.
// Each Watch returned gets its own event, even when several watch one node.
type Watch struct {
	c         *Client
	key       watchKey
	ch        chan Event
	abandoned bool // under the table's lock
	listed    bool // registered in the table
}

// Event returns the channel that receives the watch's one event. It has a
// buffer of one, so the event waits there however late it is read.
func (w *Watch) Event() <-chan Event { return w.ch }

// Remove stops the watch: no event will be delivered on it. When it was the
// last registrant on its node, the server's watch is removed too (waiting
// for the answer while ctx allows); otherwise the request is not needed.
// The removal is sent even if ctx has already ended (unlike the other
// blocking calls), so a caller can remove a watch without waiting.
// It returns nil if the watch had fired already.
func (w *Watch) Remove(ctx context.Context) error {
	if w == nil {
		return nil
	}
	t := &w.c.watches
	t.mu.Lock()
	if !w.listed {
		w.abandoned = true
		t.mu.Unlock()
		return nil
	}
	t.unlistLocked(w)
	cl := t.serverRemoveLocked(w.c, w.key.path)
	t.mu.Unlock()
	return awaitRemove(ctx, cl)
}

// PersistentWatch is a watch that stays until removed (ZooKeeper 3.6+'s
// addWatch): every change of its node, or with recursive of its node and
// every node below, is queued in the order the server sent it, none
// dropped however slowly they are read. Recursive watches report no
// NodeChildrenChanged events (a child's NodeCreated and NodeDeleted say
// it). It is restored after a reconnection; changes made while the client
// was away are not replayed (read the state again after StateReconnected).
type PersistentWatch struct {
	c         *Client
	key       watchKey
	s         *stream.Queue[Event]
	abandoned bool         // under the table's lock
	queued    atomic.Int64 // change events queued (see Queued)
}

// Queued returns how many change events the watch has queued so far, read
// or not (its EventNotWatching aside); each one counted can be had from
// Next. An event is queued before the answer to any request the server
// sent after it, so a count taken after a request's answer includes every
// event that change caused.
func (w *PersistentWatch) Queued() int64 { return w.queued.Load() }

// Next returns the next event, waiting while ctx allows. When the watch
// ends (removed, or the session over) Next returns an EventNotWatching
// event with the reason in Err, then the reason as an error.
func (w *PersistentWatch) Next(ctx context.Context) (Event, error) { return w.s.Next(ctx) }

// Ready returns a channel that is closed when Next can return at once.
func (w *PersistentWatch) Ready() <-chan struct{} { return w.s.Ready() }

// Remove ends the watch, on the server too when no other registrant of
// this client watches the node. As Watch.Remove, it sends the removal even
// if ctx has already ended, and waits for the answer only while ctx allows.
func (w *PersistentWatch) Remove(ctx context.Context) error {
	t := &w.c.watches
	t.mu.Lock()
	list := t.pers[w.key]
	i := slices.Index(list, w)
	if i < 0 {
		t.mu.Unlock()
		return nil
	}
	t.pers[w.key] = append(list[:i:i], list[i+1:]...)
	if len(t.pers[w.key]) == 0 {
		delete(t.pers, w.key)
	}
	if w.key.kind == kindRecursive {
		t.recursive--
	}
	cl := t.serverRemoveLocked(w.c, w.key.path)
	t.mu.Unlock()
	w.s.Push(Event{Type: EventNotWatching, Path: w.c.fromServer(w.key.path), Err: ErrWatchRemoved})
	w.s.Close(ErrWatchRemoved)
	return awaitRemove(ctx, cl)
}

func awaitRemove(ctx context.Context, cl *call) error {
	if cl == nil {
		return nil
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if cl.err == nil || errors.Is(cl.err, ErrNoWatcher) || errors.Is(cl.err, ErrConnectionLoss) {
		return nil // gone with the connection, or already fired
	}
	return &OpError{Op: "removeWatches", Path: cl.path, Err: cl.err}
}

func (t *watchTable) unlistLocked(w *Watch) {
	list := t.one[w.key]
	if i := slices.Index(list, w); i >= 0 {
		t.one[w.key] = append(list[:i:i], list[i+1:]...)
		if len(t.one[w.key]) == 0 {
			delete(t.one, w.key)
		}
	}
	w.listed = false
}

// usedLocked reports whether anything of this client watches path or will.
func (t *watchTable) usedLocked(path string) bool {
	if t.inflight[path] > 0 {
		return true
	}
	for k := kindData; k <= kindChild; k++ {
		if len(t.one[watchKey{path, k}]) > 0 {
			return true
		}
	}
	return len(t.pers[watchKey{path, kindPersistent}]) > 0 || len(t.pers[watchKey{path, kindRecursive}]) > 0
}

// serverRemoveLocked removes the server's watches on path when nothing of
// this client needs them anymore, and returns the request (nil if none was
// needed or there is no connection: a connection's watches end with it).
// It queues the request while holding the table's lock, so no request
// setting a watch on path can be queued between the decision and it.
func (t *watchTable) serverRemoveLocked(c *Client, path string) *call {
	if t.err != nil {
		return nil
	}
	if t.usedLocked(path) {
		t.stale[path] = true // removed once the other uses end
		return nil
	}
	delete(t.stale, path)
	c.mu.Lock()
	cn := c.cn
	c.mu.Unlock()
	if cn == nil {
		return nil
	}
	cl := c.newCall(jute.OpRemoveWatches, c.fromServer(path))
	cn.enqueue(&jute.Request{Op: jute.OpRemoveWatches, Path: path, Mode: jute.WatcherAny}, cl, nil)
	return cl
}

// tidyLocked sends a removal deferred by serverRemoveLocked once nothing
// uses the path anymore.
func (t *watchTable) tidyLocked(path string) {
	if t.stale[path] && !t.usedLocked(path) {
		t.serverRemoveLocked(t.c, path)
	}
}

// begin counts a request about to be sent that will set a watch on path.
func (t *watchTable) begin(path string) {
	t.mu.Lock()
	t.inflight[path]++
	t.mu.Unlock()
}

// settle runs when a watch-setting request is answered (on the reader
// goroutine, before any later frame is read) or fails: it registers w if
// the server set the watch (kind) and w is still wanted.
func (t *watchTable) settle(c *Client, w *Watch, kind watchKind, set bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	path := w.key.path
	if t.inflight[path]--; t.inflight[path] <= 0 {
		delete(t.inflight, path)
	}
	switch {
	case set && t.err != nil:
		// The session ended after the server set it: say so, as for
		// every watch the session had.
		w.ch <- Event{Type: EventNotWatching, Path: c.fromServer(path), Err: t.err}
	case set && !w.abandoned:
		w.key.kind = kind
		t.one[w.key] = append(t.one[w.key], w)
		w.listed = true
	case set:
		t.serverRemoveLocked(c, path) // nobody wants what the server set
	default:
		t.tidyLocked(path)
	}
}

// abandon drops w, whose caller stopped waiting for the request that sets
// it.
func (t *watchTable) abandon(c *Client, w *Watch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w.abandoned = true
	if w.listed {
		t.unlistLocked(w)
		t.serverRemoveLocked(c, w.key.path)
	}
}

// settlePersistent registers w once the server accepted addWatch.
func (t *watchTable) settlePersistent(w *PersistentWatch, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight[w.key.path]--; t.inflight[w.key.path] <= 0 {
		delete(t.inflight, w.key.path)
	}
	switch {
	case ok && t.err != nil:
		w.s.Push(Event{Type: EventNotWatching, Path: t.c.fromServer(w.key.path), Err: t.err})
		w.s.Close(t.err)
		return false
	case ok && w.abandoned:
		t.serverRemoveLocked(t.c, w.key.path)
		return false
	case !ok:
		t.tidyLocked(w.key.path)
		return false
	}
	t.pers[w.key] = append(t.pers[w.key], w)
	if w.key.kind == kindRecursive {
		t.recursive++
	}
	return true
}

// abandonPersistent drops w, whose caller stopped waiting for addWatch.
func (t *watchTable) abandonPersistent(c *Client, w *PersistentWatch) {
	t.mu.Lock()
	w.abandoned = true
	listed := slices.Index(t.pers[w.key], w) >= 0
	t.mu.Unlock()
	if listed {
		w.Remove(context.Background())
	}
}

// dispatch delivers a notification to every registrant it fires, in the
// order the server sent notifications. It runs on the reader goroutine.
func (t *watchTable) dispatch(c *Client, ev jute.WatcherEvent) {
	c.notified.Add(1)
	typ := EventType(ev.Type)
	e := Event{Type: typ, Path: c.fromServer(ev.Path)}
	if o := c.cfg.obs; o != nil && o.Watch != nil {
		o.Watch(e)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fire := func(k watchKind) {
		key := watchKey{ev.Path, k}
		list := t.one[key]
		if list == nil {
			return
		}
		for _, w := range list {
			w.listed = false
			w.ch <- e
		}
		delete(t.one, key)
		t.tidyLocked(ev.Path)
	}
	switch typ {
	case EventNodeCreated, EventNodeDataChanged:
		fire(kindData)
		fire(kindExist)
	case EventNodeDeleted:
		fire(kindData)
		fire(kindExist)
		fire(kindChild)
	case EventNodeChildrenChanged:
		fire(kindChild)
	}
	for _, w := range t.pers[watchKey{ev.Path, kindPersistent}] {
		w.s.Push(e)
		w.queued.Add(1) // after: an event counted can be had from Next
	}
	if t.recursive == 0 || typ == EventNodeChildrenChanged {
		return
	}
	for p := ev.Path; ; {
		for _, w := range t.pers[watchKey{p, kindRecursive}] {
			w.s.Push(e)
			w.queued.Add(1)
		}
		if p == "/" {
			return
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return // not an absolute path (a broken server): no ancestors
		}
		if i == 0 {
			p = "/"
		} else {
			p = p[:i]
		}
	}
}

// restore queues the requests that set the client's watches again on a new
// connection: setWatches2 with the newest zxid seen, so the server fires at
// once for what changed meanwhile. The lists are split into packets of at
// most 128 KiB, as ZooKeeper's Java client does.
func (t *watchTable) restoreThen(cn *conn, publish func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer publish()
	clear(t.stale) // a new connection has no watches but those restored
	r := jute.Request{Op: jute.OpSetWatches2, RelativeZxid: cn.c.lastZxid.Load()}
	size := 0
	flush := func() {
		if size == 0 {
			return
		}
		req := r
		cn.enqueueSetWatches(&req)
		r = jute.Request{Op: jute.OpSetWatches2, RelativeZxid: r.RelativeZxid}
		size = 0
	}
	for key := range t.one {
		t.addRestore(&r, key, &size, flush)
	}
	for key := range t.pers {
		t.addRestore(&r, key, &size, flush)
	}
	flush()
}

func (t *watchTable) addRestore(r *jute.Request, key watchKey, size *int, flush func()) {
	const limit = 128 << 10
	if *size+len(key.path)+4 > limit {
		flush()
	}
	var list *[]string
	switch key.kind {
	case kindData:
		list = &r.DataWatches
	case kindExist:
		list = &r.ExistWatches
	case kindChild:
		list = &r.ChildWatches
	case kindPersistent:
		list = &r.PersistWatches
	case kindRecursive:
		list = &r.RecursiveWatches
	}
	*list = append(*list, key.path)
	*size += len(key.path) + 4
}

// end fails every watch: the session is over.
func (t *watchTable) end(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	t.err = err
	for key, list := range t.one {
		for _, w := range list {
			w.listed = false
			w.ch <- Event{Type: EventNotWatching, Path: t.c.fromServer(key.path), Err: err}
		}
	}
	for key, list := range t.pers {
		for _, w := range list {
			w.s.Push(Event{Type: EventNotWatching, Path: t.c.fromServer(key.path), Err: err})
			w.s.Close(err)
		}
	}
	clear(t.one)
	clear(t.pers)
}

// enqueueSetWatches queues a setWatches2 packet (xid -8, answered out of
// the request order's matching).
func (cn *conn) enqueueSetWatches(r *jute.Request) {
	r.Xid = jute.XidSetWatches
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dead {
		return
	}
	cn.out = jute.AppendFrame(cn.out, r)
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}
