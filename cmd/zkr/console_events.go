package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes"
)

// subtreeLinger is how long a subtree's Cache outlives its last reader, so
// that a page reloading, or a recipes request between two of its streams,
// does not load the subtree again.
const subtreeLinger = 30 * time.Second

// maxPending is the most changes a stream queues for a slow page before it
// tells the page to read everything again instead.
const maxPending = 1000

// subtree is one shown subtree: one Cache (one persistent recursive watch),
// shared by every page and request that shows it, made again on each new
// session of the console.
type subtree struct {
	path  string
	ready chan struct{} // closed once the first cache or err is set
	err   error         // why the first cache could not be made

	ctx  context.Context // ends when the console closes or no one shows the subtree
	stop context.CancelFunc

	refs  int         // under console.mu
	timer *time.Timer // closes an unused subtree; under console.mu

	mu    sync.Mutex
	cache *zkrecipes.Cache // the current one
	subs  map[*subscriber]struct{}
	done  bool // the subtree is no longer followed
}

// current returns the subtree's Cache: the one on the console's current
// session, or, while the next one is made, the last copy.
func (st *subtree) current() *zkrecipes.Cache {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cache
}

// subscriber is one event stream's queue of changes.
type subscriber struct {
	mu       sync.Mutex
	pending  []changeEvent
	overflow bool
	ended    error
	poke     chan struct{} // capacity 1
}

// changeEvent is one change as the page is told of it.
type changeEvent struct {
	Type string `json:"type"` // created, changed, deleted
	Path string `json:"path"`
}

func (sub *subscriber) push(e changeEvent) {
	sub.mu.Lock()
	if len(sub.pending) < maxPending {
		sub.pending = append(sub.pending, e)
	} else {
		sub.overflow = true
	}
	sub.mu.Unlock()
	sub.wake()
}

// resync drops the queued changes and tells the page to read everything
// again.
func (sub *subscriber) resync() {
	sub.mu.Lock()
	sub.pending, sub.overflow = nil, true
	sub.mu.Unlock()
	sub.wake()
}

// wake tells the stream to look at its queue.
func (sub *subscriber) wake() {
	select {
	case sub.poke <- struct{}{}:
	default:
	}
}

// acquire returns the subtree at path, made (its Cache loaded) if no one
// shows it yet. Release it when done.
func (c *console) acquire(ctx context.Context, path string) (*subtree, error) {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, errors.New("the console is closing")
	}
	st := c.subtrees[path]
	if st == nil {
		st = &subtree{path: path, ready: make(chan struct{}), subs: map[*subscriber]struct{}{}}
		st.ctx, st.stop = context.WithCancel(c.ctx)
		c.subtrees[path] = st
		c.wg.Add(1)
		go c.load(st)
	}
	st.refs++
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	c.mu.Unlock()
	select {
	case <-st.ready:
	case <-ctx.Done():
		c.release(st)
		return nil, ctx.Err()
	}
	if st.err != nil {
		c.release(st)
		return nil, st.err
	}
	return st, nil
}

// release gives back a subtree acquired; the last one out lets it linger,
// then closes it.
func (c *console) release(st *subtree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.refs--
	if st.refs > 0 {
		return
	}
	st.timer = time.AfterFunc(subtreeLinger, func() {
		c.mu.Lock()
		if st.refs > 0 || c.subtrees[st.path] != st {
			c.mu.Unlock()
			return
		}
		delete(c.subtrees, st.path)
		c.mu.Unlock()
		st.stop() // load closes the cache
	})
}

// load makes st's Cache and passes its changes to st's subscribers until
// st is no longer shown or the console closes; when the console's session
// is over, it makes the Cache again on the next session and tells the
// subscribers to read everything again.
func (c *console) load(st *subtree) {
	defer c.wg.Done()
	defer st.stop()
	s := c.session()
	cache, err := zkrecipes.NewCache(st.ctx, s, st.path)
	if err != nil {
		st.err = fmt.Errorf("watching %s: %w", st.path, err)
		c.forget(st)
		close(st.ready)
		return
	}
	st.mu.Lock()
	st.cache = cache
	st.mu.Unlock()
	close(st.ready)
	for {
		err := c.pass(st, cache)
		cache.Close()
		if st.ctx.Err() != nil || !over(s) {
			c.end(st, err)
			return
		}
		// The session is over: follow the subtree on the next one.
		cache, s, err = c.reload(st, s)
		if err != nil {
			c.end(st, err)
			return
		}
		st.mu.Lock()
		st.cache = cache
		for sub := range st.subs {
			sub.resync()
		}
		st.mu.Unlock()
	}
}

// reload makes st's Cache again once the console has a session other than
// old (again, after a pause, while that fails on a live session), until
// st's context ends.
func (c *console) reload(st *subtree, old *zkrecipes.Session) (*zkrecipes.Cache, *zkrecipes.Session, error) {
	s := old
	pause := 100 * time.Millisecond
	for {
		if over(s) {
			var err error
			if s, err = c.nextSession(st.ctx, s); err != nil {
				return nil, nil, err
			}
		}
		cache, err := zkrecipes.NewCache(st.ctx, s, st.path)
		if err == nil {
			return cache, s, nil
		}
		if st.ctx.Err() != nil {
			return nil, nil, st.ctx.Err()
		}
		if !over(s) {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-st.ctx.Done():
				t.Stop()
				return nil, nil, st.ctx.Err()
			}
			pause = min(2*pause, 5*time.Second)
		}
	}
}

// pass passes the changes of cache to st's subscribers until the cache
// stops (the session is over) or st's context ends, and returns why.
func (c *console) pass(st *subtree, cache *zkrecipes.Cache) error {
	initialized := false
	for {
		ev, err := cache.Next(st.ctx)
		if err != nil {
			return err
		}
		if !initialized {
			// The initial copy's events: the page reads what it shows.
			initialized = ev.Type == zkrecipes.CacheInitialized
			continue
		}
		var typ string
		switch ev.Type {
		case zkrecipes.CacheCreated:
			typ = "created"
		case zkrecipes.CacheChanged:
			typ = "changed"
		case zkrecipes.CacheDeleted:
			typ = "deleted"
		default:
			continue
		}
		st.mu.Lock()
		for sub := range st.subs {
			sub.push(changeEvent{Type: typ, Path: ev.Path})
		}
		st.mu.Unlock()
	}
}

// forget takes st out of the shown subtrees, if it is still there: the
// next request makes it again.
func (c *console) forget(st *subtree) {
	c.mu.Lock()
	if c.subtrees[st.path] == st {
		delete(c.subtrees, st.path)
	}
	c.mu.Unlock()
}

// end stops following st and ends its subscribers' streams with err.
func (c *console) end(st *subtree, err error) {
	c.forget(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	for sub := range st.subs {
		sub.mu.Lock()
		sub.ended = err
		sub.mu.Unlock()
		sub.wake()
	}
}

// events streams the changes under path as server-sent events ("change",
// whose data is a JSON array of changes; "resync" when changes were
// dropped for a slow reader, or the subtree is followed on a new session,
// and the page must read everything again; "conn", the console's link to
// ZooKeeper (a connState), first and at each change; "end" when the watch
// stopped), with a comment every 15 seconds to keep the connection open.
func (c *console) events(w http.ResponseWriter, r *http.Request) {
	path := pathArg(r)
	st, err := c.acquire(r.Context(), path)
	if err != nil {
		httpError(w, statusOf(err), err)
		return
	}
	defer c.release(st)
	sub := &subscriber{poke: make(chan struct{}, 1)}
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		httpError(w, http.StatusBadGateway, fmt.Errorf("the watch on %s stopped", path))
		return
	}
	st.subs[sub] = struct{}{}
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.subs, sub)
		st.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: ready\ndata: %q\n\n", path)
	cs, csChanged := c.conn()
	b, _ := json.Marshal(cs)
	fmt.Fprintf(w, "event: conn\ndata: %s\n\n", b)
	rc.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
		case <-csChanged:
			cs, csChanged = c.conn()
			b, _ := json.Marshal(cs)
			fmt.Fprintf(w, "event: conn\ndata: %s\n\n", b)
		case <-sub.poke:
			sub.mu.Lock()
			pending, overflow, ended := sub.pending, sub.overflow, sub.ended
			sub.pending, sub.overflow = nil, false
			sub.mu.Unlock()
			if overflow {
				fmt.Fprint(w, "event: resync\ndata: {}\n\n")
			} else if len(pending) > 0 {
				b, _ := json.Marshal(pending)
				fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
			}
			if ended != nil {
				b, _ := json.Marshal(ended.Error())
				fmt.Fprintf(w, "event: end\ndata: %s\n\n", b)
				rc.Flush()
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
