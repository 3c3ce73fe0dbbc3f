package zkrecipes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ServiceCache is a local copy of the instances of one service, kept up to
// date over one persistent recursive watch of the service's node (a
// [Cache] of "<base>/<name>"): a change costs the read of the instance that
// changed, never a listing of the service. It is what a [Provider], the
// gRPC resolver (module zkgrpc) and a [ServiceTransport] read.
//
// One copy is shared by every ServiceCache of the same service, base path
// and Session: [Discovery.ServiceCache] returns a handle on it, made on the
// first call and ended when the last handle is closed. So every consumer of
// a service in a process that shares a Session costs one watch and one copy.
//
// What a reader can assume is what a Cache guarantees (see [Cache]):
// the copy converges to the server's instances once they stop changing and
// the session is connected; each instance's versions only move forward, and
// every version reported is one the server really had; an instance
// registered, updated or unregistered while the session was disconnected is
// caught up after the reconnection. What it cannot assume: freshness (the
// copy lags the server; a Register through the same Session is not
// necessarily in the copy when Register returns), every intermediate
// version, or one moment across instances. A node under the service whose
// data is not an instance is left out, and logged.
//
// How long a gone instance can stay in the copy. ZooKeeper sends a watch
// event before its answers to later requests, and after a reconnection
// the copy reads the service again. So an instance that left the server
// at time t (unregistered, or its registrant's session expired) is out of
// the copy once the Session has had an answer to a request sent after t
// and the copy has read what that told it: one read of the instance after
// the event, or the re-read of the service after a reconnection. While the
// Session is connected that is about a round trip and a read; while it is
// cut off from the server, the copy keeps what it had, for as long as the
// cut lasts. [ServiceCache.Stale] bounds this by the session timeout T: it
// reports the copy stale once the server has answered the Session nothing
// for longer than T (see zkclient.Client.Confirmed), or once the copy has
// stopped; a [Provider] picks nothing from a stale copy. So an instance
// gone from the server for longer than T plus that reading time is never
// picked by a Provider, and is not in Instances while Stale returns nil.
//
// When the Session ends the copy stops (Done is closed, Err tells why) and
// Instances keeps answering the last copy; a ServiceCache never moves to
// another Session by itself. Needs ZooKeeper 3.6 or later, as Cache does;
// on ZooKeeper 3.8, do not also set a one-shot watch on the service's node
// itself (Discovery.Watch) on the same Session (see [Cache]).
type ServiceCache struct {
	sh   *sharedService
	once sync.Once
}

// sharedService is the one copy of a service per Session, base and name.
type sharedService struct {
	s     *Session
	key   string
	name  string
	ready chan struct{} // closed once made (or failed: err set, c nil)
	err   error         // why making it failed
	c     *Cache
	stop  chan struct{} // closed by the last Close
	ended chan struct{} // the follow loop returned
	refs  int           // guarded by Session.svcMu

	mu      sync.Mutex
	insts   []ServiceInstance // sorted by id; replaced, never modified
	changed chan struct{}     // closed (and replaced) at each change
	done    chan struct{}     // closed when the copy stops following the server
	why     error
}

// ServiceCache returns a handle on the local copy of the instances of the
// service name (see [ServiceCache]), made and loaded on the first call for
// this Session, base path and name (ctx bounds that load, and a caller's
// wait for another's), shared afterwards. Close the handle when done with
// it.
func (d *Discovery) ServiceCache(ctx context.Context, name string) (*ServiceCache, error) {
	what := fmt.Sprintf("service cache of %q in %s", name, d.base)
	if d.err != nil {
		return nil, errorf("%s: %w", what, d.err)
	}
	if err := d.checkSegment("service name", name); err != nil {
		return nil, errorf("%s: %w", what, err)
	}
	s := d.s
	key := d.base + "/" + name
	for {
		s.svcMu.Lock()
		sh := s.services[key]
		if sh == nil {
			sh = &sharedService{s: s, key: key, name: name, ready: make(chan struct{}), refs: 1}
			if s.services == nil {
				s.services = make(map[string]*sharedService)
			}
			s.services[key] = sh
			s.svcMu.Unlock()
			sh.start(ctx)
			if sh.err != nil {
				return nil, errorf("%s: %w", what, sh.err)
			}
			return &ServiceCache{sh: sh}, nil
		}
		sh.refs++
		s.svcMu.Unlock()
		select {
		case <-sh.ready:
		case <-ctx.Done():
			sh.release()
			return nil, errorf("%s: %w", what, ctx.Err())
		}
		if sh.err == nil {
			return &ServiceCache{sh: sh}, nil
		}
		sh.release()
		if ctx.Err() != nil || s.Err() != nil {
			return nil, errorf("%s: %w", what, sh.err)
		}
		// The maker's load failed (its ctx, say): make it ourselves.
	}
}

// start makes the Cache, loads the copy and starts following it; on
// failure it records why and leaves the registry.
func (sh *sharedService) start(ctx context.Context) {
	defer close(sh.ready)
	c, err := NewCache(ctx, sh.s, sh.key)
	if err != nil {
		sh.err = err
		sh.s.svcMu.Lock()
		if sh.s.services[sh.key] == sh {
			delete(sh.s.services, sh.key)
		}
		sh.s.svcMu.Unlock()
		return
	}
	sh.c = c
	sh.stop = make(chan struct{})
	sh.ended = make(chan struct{})
	sh.changed = make(chan struct{})
	sh.done = make(chan struct{})
	byID := make(map[string]ServiceInstance)
	// The initial copy is queued up to CacheInitialized: take it whole.
	for loaded := false; !loaded; {
		select {
		case <-c.Ready():
		default:
			loaded = true // never: CacheInitialized is queued
			continue
		}
		ev, err := c.Next(context.Background())
		loaded = err != nil || ev.Type == CacheInitialized
		sh.apply(byID, ev)
	}
	sh.publish(byID)
	go sh.follow(byID)
}

// follow applies the Cache's events to the copy until the Cache stops.
func (sh *sharedService) follow(byID map[string]ServiceInstance) {
	defer close(sh.ended)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sh.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		ev, err := sh.c.Next(ctx)
		if err != nil {
			sh.mu.Lock()
			sh.why = sh.c.Err()
			if sh.why == nil {
				sh.why = ErrStreamClosed
			}
			close(sh.done)
			close(sh.changed)
			sh.mu.Unlock()
			return
		}
		if !sh.apply(byID, ev) {
			continue
		}
		// Take what is queued already before telling: one change for a
		// burst.
		for more := true; more; {
			select {
			case <-sh.c.Ready():
				if ev, err = sh.c.Next(ctx); err == nil {
					sh.apply(byID, ev)
				} else {
					more = false
				}
			default:
				more = false
			}
		}
		sh.publish(byID)
	}
}

// apply applies one event of the Cache to byID and reports whether it
// changed an instance.
func (sh *sharedService) apply(byID map[string]ServiceInstance, ev CacheEvent) bool {
	id, ok := strings.CutPrefix(ev.Path, sh.key+"/")
	if !ok || strings.Contains(id, "/") {
		return false // the service's node, or below an instance
	}
	switch ev.Type {
	case CacheCreated, CacheChanged:
		var inst ServiceInstance
		if err := json.Unmarshal(ev.Data, &inst); err != nil {
			sh.s.log.Warn("zkrecipes: not a service instance; left out", "node", ev.Path, "err", err)
			_, had := byID[id]
			delete(byID, id)
			return had
		}
		byID[id] = inst
	case CacheDeleted:
		delete(byID, id)
	default:
		return false
	}
	return true
}

// publish replaces the copy with byID's instances and tells the waiters.
func (sh *sharedService) publish(byID map[string]ServiceInstance) {
	insts := make([]ServiceInstance, 0, len(byID))
	for _, in := range byID {
		insts = append(insts, in)
	}
	slices.SortFunc(insts, func(a, b ServiceInstance) int { return strings.Compare(a.ID, b.ID) })
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.insts != nil && sameInstances(sh.insts, insts) {
		return
	}
	sh.insts = insts
	close(sh.changed)
	sh.changed = make(chan struct{})
}

// release drops one reference; the last one stops the copy.
func (sh *sharedService) release() {
	sh.s.svcMu.Lock()
	sh.refs--
	last := sh.refs == 0
	if last && sh.s.services[sh.key] == sh {
		delete(sh.s.services, sh.key)
	}
	sh.s.svcMu.Unlock()
	if !last {
		return
	}
	<-sh.ready
	if sh.c == nil {
		return
	}
	close(sh.stop)
	<-sh.ended
	sh.c.Close()
}

// Name returns the service's name.
func (c *ServiceCache) Name() string { return c.sh.name }

// Instances returns the instances in the copy, sorted by id, without a
// request. The slice is shared: do not modify it.
func (c *ServiceCache) Instances() []ServiceInstance {
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	return c.sh.insts
}

// Changed returns a channel that is closed at the copy's next change (or
// when it stops). To follow the instances without missing a change, take
// Changed, then read Instances, then wait on the channel taken.
func (c *ServiceCache) Changed() <-chan struct{} {
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	return c.sh.changed
}

// Done returns a channel that is closed when the copy stops following the
// server: its Session ended, or the last handle was closed.
func (c *ServiceCache) Done() <-chan struct{} { return c.sh.done }

// Err returns nil while the copy follows the server, then why it stopped:
// an error wrapping [ErrSessionExpired] or [ErrSessionClosed], or
// [ErrStreamClosed].
func (c *ServiceCache) Err() error {
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	return c.sh.why
}

// Stale returns nil while the copy is within its bound (see
// [ServiceCache]): it follows the server, and the server has answered its
// Session within the session timeout. Otherwise it returns why not: the
// copy stopped (wrapping Err's error), or the server has answered nothing
// for longer than the session timeout (wrapping [ErrStaleInstances]); the
// latter passes once the Session hears the server again. It costs no
// request.
func (c *ServiceCache) Stale() error {
	if err := c.Err(); err != nil {
		return fmt.Errorf("service cache of %q stopped: %w", c.sh.name, err)
	}
	cl := c.sh.s.Client()
	if quiet := time.Since(cl.Confirmed()); quiet > cl.Timeout() {
		return fmt.Errorf("service cache of %q: %w: no answer from ZooKeeper for %v, more than the session timeout %v",
			c.sh.name, ErrStaleInstances, quiet.Round(time.Millisecond), cl.Timeout())
	}
	return nil
}

// Close releases the handle; the last handle on a copy stops it and removes
// its watch. Calling Close again does nothing.
func (c *ServiceCache) Close() error {
	c.once.Do(c.sh.release)
	return nil
}
