package zkrecipes

import (
	"context"
	"encoding/hex"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/zkclient"
)

// This file is the grant (see WithGrants): how a Mutex holder (an
// Election's leader, an RWMutex writer) hands the lock to the next
// contender (or an RWMutex writer to the readers after it) in the
// transaction that deletes its own node, so that the next holds on a
// watch event, without a listing.
//
// A lock's grants live beside it, under the lock's path with ".grants"
// appended: one directory per session, <lock>.grants/<session key> (a
// container holding an ephemeral node of the session's, so that the
// server removes it after the session has ended), which the session
// watches with one recursive watch (its grant route). By default a
// session sets its route up in the background when one of its contenders
// first has to wait there (warmRoute), and takes it down when no
// contender has used it for a while (retire); with WithGrants, the first
// Lock there sets it up. The session key is 48 random bits, and the session's
// contenders carry it in the first 12 hex digits of their node's UUID, so
// that anyone who knows the node's name knows where to grant it. A holder
// that knows the contender right after it (its heir) releases with one
// multi:
//
//	check(heir's node), create(<lock>.grants/<heir's key>/<heir's UUID>+<run>, ephemeral),
//	delete(the grant it received, if any), delete(own node)
//
// The heir's route reports the grant's NodeCreated before its
// predecessor's NodeDeleted (one transaction, operations in order), and
// the heir holds: the granter was the lowest node (it held, and nodes made
// later sort after it); no node can stand between it and the heir (the
// granter's listing, or the run it was granted, showed every node between
// them, and a node made later sorts after both); and the heir's node was
// there (the check). Only a granter writes under <lock>.grants, and only in
// that multi, so no other write (a user's set, Curator's revocation) can
// pass for a grant.
//
// The run names the contenders known to follow the heir, nearest first, so
// that the heir can grant in turn without a listing: one listing per run
// of up to maxRun handoffs. Only contenders that take grants are granted:
// a UUID of version 8 marks them (grantingUUID), where Curator's, kazoo's
// and a zkrecipes contender's without a route are of version 4. A run
// stops before the first contender that does not take grants, and that
// one lists, as every contender does without grants. An RWMutex writer
// followed by readers grants them all, one check and create each, before
// its delete (see successors). A grant that cannot be made (the heir left:
// the check fails) is dropped from the multi, which is sent again: with
// no heir left, a plain delete, and the next waiter lists. The delete of
// the granter's own node is also what makes the multi fail when that node
// is gone (someone deleted it): then nothing is granted.

// maxRun is the most contenders a grant names after its heir.
const maxRun = 8

// maxReaders is the most readers an RWMutex writer grants in one release.
const maxReaders = 16

// grantsSuffix makes a lock's grants directory from its path.
const grantsSuffix = ".grants"

// grantsOwner names the ephemeral node a session keeps in its grants
// directory on a lock, for as long as the session lives. The directory is
// a container, which ZooKeeper removes only once it is empty after having
// had a child: without the node, the directory of a session never granted
// the lock would stay on the server for ever (one per session and lock);
// with it, the directory goes after the session does, when the server
// next looks (every minute by default), and the lock's grants directory
// after the last of them.
const grantsOwner = "owner"

// takesGrants reports whether the node name is that of a contender of
// kind k that takes grants ("_c_" + version-8 UUID + "-" + k's marker +
// sequence).
func takesGrants(name string, k kind) bool {
	const uuidEnd = 3 + 36
	return len(name) > uuidEnd && strings.HasPrefix(name, "_c_") && name[3+14] == '8' &&
		strings.HasPrefix(name[uuidEnd:], "-"+k.marker)
}

// uuidOf returns the UUID of a protected node's name or prefix.
func uuidOf(name string) string { return name[3 : 3+36] }

// keyOf returns the session key carried by a contender's UUID.
func keyOf(u string) string { return u[0:8] + u[9:13] }

// grantKey returns the session's key, made on first use.
func (s *Session) grantKey() string {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	if s.grKey == "" {
		u := uuid.New()
		s.grKey = hex.EncodeToString(u[:6])
	}
	return s.grKey
}

// grantingUUID returns a new version-8 UUID carrying the session's key.
func (s *Session) grantingUUID() string {
	u := uuid.New()
	k, _ := hex.DecodeString(s.grantKey())
	copy(u[:6], k)
	u[6] = u[6]&0x0f | 0x80
	return u.String()
}

// grantRoute is a session's one watch for grants on one lock: a recursive
// watch on <lock>.grants/<session key>, whose grants it routes to the
// session's waiting contenders by UUID.
type grantRoute struct {
	s    *Session
	lock string // the lock's path
	dir  string // <lock>.grants/<key>
	w    *zkclient.PersistentWatch
	gone atomic.Bool   // the directory was removed (by someone else): make it again
	done chan struct{} // closed when run returns

	// Under the session's grMu: the tickets enrolled (see route and
	// unroute), and, while there are none, the timer that takes the route
	// down (see retire); gen tells a stale timer.
	users int
	idle  *time.Timer
	gen   int

	pumpMu sync.Mutex // one router at a time (see pump)

	mu      sync.Mutex
	waiting map[string]chan string // by contender UUID: the grant's path
}

// routeLinger is how long a grant route that no ticket uses is kept
// before it is taken down (see retire).
const routeLinger = time.Minute

// route returns the session's grant route for the lock at dir, enrolled
// for one ticket (see unroute): making its directory (see makeGrantsDir)
// and setting its watch the first time, and the directory again if
// someone else removed it.
func (s *Session) route(ctx context.Context, dir string) (*grantRoute, error) {
	for {
		r, err := s.openRoute(ctx, dir)
		if err != nil {
			return nil, err
		}
		s.grMu.Lock()
		if s.routes[dir] == r { // not taken down meanwhile
			s.useLocked(r)
			s.grMu.Unlock()
			return r, nil
		}
		s.grMu.Unlock()
	}
}

// unroute ends one enrolment of a ticket with r; the last one starts the
// timer that takes r down.
func (s *Session) unroute(r *grantRoute) {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	s.unrouteLocked(r)
}

func (s *Session) unrouteLocked(r *grantRoute) {
	r.users--
	if r.users > 0 || s.grClosed || s.routes[r.lock] != r {
		return
	}
	r.gen++
	gen := r.gen
	r.idle = time.AfterFunc(s.grLinger, func() { s.retire(r, gen) })
}

// liveRoute returns the session's grant route on the lock at dir, enrolled
// for one ticket (see unroute), if it has one up and not being taken down,
// without waiting or sending anything; else nil.
func (s *Session) liveRoute(dir string) *grantRoute {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	r := s.routes[dir]
	if r == nil || r.gone.Load() {
		return nil
	}
	s.useLocked(r)
	return r
}

// useLocked enrols one user with r, stopping its idle timer.
func (s *Session) useLocked(r *grantRoute) {
	r.users++
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
}

// routePin keeps a session's grant route on a lock up for a contender
// there that takes no grants itself but waits (see warmRoute), until drop.
type routePin struct {
	r       *grantRoute // once the route is up; under the session's grMu
	dropped bool
}

// drop ends the pin; the route goes routeLinger after its last user.
func (p *routePin) drop(s *Session) {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	p.dropped = true
	if p.r != nil {
		s.unrouteLocked(p.r)
		p.r = nil
	}
}

// warmRoute returns a pin on the session's grant route on the lock at dir
// (see grantsOnContention): a contender there has had to wait, so the next
// ones there take grants. It sets the route up in the background, unless
// it is up already or being set up; the pin keeps it up while the
// contender waits and holds, even for longer than routeLinger.
func (s *Session) warmRoute(dir string) *routePin {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	p := &routePin{}
	if s.grUnsupported.Load() {
		return p
	}
	if r := s.routes[dir]; r != nil {
		s.useLocked(r)
		p.r = r
		return p
	}
	if pins, ok := s.warming[dir]; ok || s.grClosed {
		if ok {
			s.warming[dir] = append(pins, p)
		}
		return p
	}
	ran := s.inBackground(func(ctx context.Context) {
		r, err := s.route(ctx, dir)
		s.grMu.Lock()
		defer s.grMu.Unlock()
		for _, p := range s.warming[dir] {
			if err == nil && !p.dropped {
				s.useLocked(r)
				p.r = r
			}
		}
		delete(s.warming, dir)
		if err == nil {
			s.unrouteLocked(r)
		}
	})
	if ran {
		if s.warming == nil {
			s.warming = map[string][]*routePin{}
		}
		s.warming[dir] = []*routePin{p}
	}
	return p
}

// retire takes the route r down, if no ticket took it up since the timer
// of generation gen was set: it removes r from the session's routes, then,
// in the background, removes its watch and deletes the session's owner
// node in its directory, which lets the server remove the directory. A
// route wanted again meanwhile waits until that is done, then is made
// anew. A grant made in the directory after the watch is removed (possible
// only for a node of the session's whose deletion was left to the
// background) stays until its granter's session ends.
func (s *Session) retire(r *grantRoute, gen int) {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	if r.users > 0 || r.gen != gen || s.grClosed || s.routes[r.lock] != r {
		return
	}
	done := make(chan struct{})
	before := r.w.Queued()
	ran := s.inBackground(func(ctx context.Context) {
		defer func() {
			s.grMu.Lock()
			if s.retiring[r.lock] == done {
				delete(s.retiring, r.lock)
			}
			s.grMu.Unlock()
			close(done)
		}()
		r.w.Remove(ctx)
		<-r.done
		s.grMu.Lock()
		s.grGone += r.w.Queued() - before
		s.grMu.Unlock()
		// Again after a lost answer only: another failure (no
		// permission, say) leaves the node to the session's end.
		s.retry(ctx, func(ctx context.Context) error {
			s.stats.deletes.Add(1)
			err := s.c.Delete(ctx, r.dir+"/"+grantsOwner, -1)
			if err == nil || errors.Is(err, zkclient.ErrNoNode) {
				return nil
			}
			if !errors.Is(err, zkclient.ErrConnectionLoss) {
				s.log.Warn("zookeeper: taking a grant route down: its node stays until the session ends", "path", r.dir, "err", err)
				return nil
			}
			return err
		})
	})
	if !ran {
		return
	}
	delete(s.routes, r.lock)
	s.grGone += before
	if s.retiring == nil {
		s.retiring = map[string]chan struct{}{}
	}
	s.retiring[r.lock] = done
}

// openRoute returns the session's grant route for the lock at dir, as
// route does, without enrolling a ticket.
func (s *Session) openRoute(ctx context.Context, dir string) (*grantRoute, error) {
	if s.grUnsupported.Load() {
		return nil, errorf("grant route on %s: %w: the server has no recursive watches (ZooKeeper 3.6 or later)", dir, zkclient.ErrUnimplemented)
	}
	for {
		s.grMu.Lock()
		busy := s.retiring[dir]
		s.grMu.Unlock()
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.grMu.Lock()
	r := s.routes[dir]
	s.grMu.Unlock()
	if r != nil {
		r.pump() // a removal of the directory already told is seen
	}
	if r != nil && !r.gone.Load() {
		return r, nil
	}
	gd := dir + grantsSuffix + "/" + s.grantKey()
	if err := s.makeGrantsDir(ctx, gd); err != nil {
		return nil, err
	}
	if r != nil {
		r.gone.Store(false)
		return r, nil
	}
	w, err := s.c.AddWatch(ctx, gd, true)
	if errors.Is(err, zkclient.ErrUnimplemented) {
		s.grUnsupported.Store(true) // a server before 3.6: no recursive watches
	}
	if err != nil {
		return nil, err
	}
	r = &grantRoute{s: s, lock: dir, dir: gd, w: w, done: make(chan struct{}), waiting: map[string]chan string{}}
	s.grMu.Lock()
	if old, closed := s.routes[dir], s.grClosed; old != nil || closed || s.retiring[dir] != nil {
		// Another call made the route meanwhile, or the session is
		// closing, or a route made before this one began is being taken
		// down (its owner node, which this call may have found and kept,
		// is about to go): this one is not wanted.
		s.grMu.Unlock()
		w.Remove(ctx)
		switch {
		case old != nil:
			return old, nil
		case closed:
			return nil, errorf("grant route on %s: %w", dir, ErrSessionClosed)
		}
		return s.openRoute(ctx, dir)
	}
	if s.routes == nil {
		s.routes = map[string]*grantRoute{}
	}
	s.routes[dir] = r
	s.grMu.Unlock()
	go r.run()
	return r, nil
}

// makeGrantsDir makes the session's grants directory gd and its owner
// node (see grantsOwner) in one multi, so that the directory is never left
// without the child that lets the server remove it: one write when the
// lock's grants directory exists. When it does not, gd's missing parents
// are made first (containers, one write each, the existing ones too) and
// the multi is sent again. When gd exists already (made by an earlier
// call, or by this multi with its answer lost) or the connection was
// lost, the owner node is made alone, waiting out a connection loss. If
// gd or a parent went meanwhile (the server removes empty containers: a
// route taken down, see retire), it starts again: three tries in all.
func (s *Session) makeGrantsDir(ctx context.Context, gd string) error {
	owner := gd + "/" + grantsOwner
	multi := func() ([]zkclient.OpResult, error) {
		s.stats.creates.Add(2)
		return s.c.Multi(ctx, s.c.CreateOp(gd, nil, zkclient.Container, s.acl), s.c.CreateOp(owner, nil, zkclient.Ephemeral, s.acl))
	}
	for attempt := 1; ; attempt++ {
		res, err := multi()
		switch {
		case err == nil:
			return nil
		case len(res) == 2 && errors.Is(res[0].Err, zkclient.ErrNoNode) && attempt < 3:
			if err := s.makePath(ctx, parents(gd), zkclient.Container, nil); err != nil {
				return err
			}
			continue
		case len(res) == 2 && errors.Is(res[0].Err, zkclient.ErrNodeExists), errors.Is(err, zkclient.ErrConnectionLoss):
			err = s.makePath(ctx, []string{owner}, zkclient.Ephemeral, nil)
			if err == nil || !errors.Is(err, zkclient.ErrNoNode) || attempt == 3 {
				return err
			}
			continue
		}
		return errorf("create %s: %w", gd, err)
	}
}

// grantEvents returns how many events the session's grant routes have
// received (see Stats.GrantEvents).
func (s *Session) grantEvents() int64 {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	n := s.grGone
	for _, r := range s.routes {
		n += r.w.Queued()
	}
	return n
}

// closeRoutes waits for the grant routes' goroutines, which end with the
// session; no route starts after it.
func (s *Session) closeRoutes() {
	s.grMu.Lock()
	s.grClosed = true
	rs := s.routes
	for _, r := range rs {
		if r.idle != nil {
			r.idle.Stop()
		}
	}
	s.grMu.Unlock()
	for _, r := range rs {
		<-r.done
	}
}

func (r *grantRoute) run() {
	defer close(r.done)
	for {
		select {
		case <-r.w.Ready():
		case <-r.s.Done():
			return
		}
		if !r.pump() {
			return
		}
	}
}

// pump routes the events queued now, without waiting, and reports false
// once the watch has ended. Waiting contenders call it too, so that a
// grant queued before their predecessor's deletion is routed before they
// act on that deletion.
func (r *grantRoute) pump() bool {
	r.pumpMu.Lock()
	defer r.pumpMu.Unlock()
	for {
		select {
		case <-r.w.Ready():
		default:
			return true
		}
		ev, err := r.w.Next(context.Background())
		if err != nil || ev.Type == zkclient.EventNotWatching {
			return false
		}
		switch {
		case ev.Path == r.dir && ev.Type == zkclient.EventNodeDeleted:
			r.gone.Store(true)
		case ev.Type == zkclient.EventNodeCreated && path.Dir(ev.Path) == r.dir:
			name := path.Base(ev.Path)
			if len(name) < 36 {
				continue
			}
			// Sent under mu, so that unregister finds it in the channel.
			r.mu.Lock()
			ch := r.waiting[name[:36]]
			if ch != nil {
				select {
				case ch <- ev.Path:
				default:
				}
			}
			r.mu.Unlock()
			if ch == nil {
				// Its contender left before the grant came (it gave up
				// as it was granted): nobody will take it. The next
				// waiter learns of the contender's deletion and lists.
				r.s.c.DeleteAsync(ev.Path, -1)
			}
		}
	}
}

// grantable is a ticket's part in grants: set when it takes them.
type grantable struct {
	route *grantRoute // nil: the ticket takes no grants
	gch   chan string // the grant's path, from the route
	grant string      // the grant received, once read from gch
	run   []string    // the contenders known to follow, nearest first, once it holds
	// readers: an RWMutex writer's heirs when readers follow it (see
	// successors), granted all at once
	readers []string
	pin     *routePin // a ticket that takes no grants: it keeps the route it warmed up
	byGrant bool      // it holds on a grant, without a listing (see wait)
}

// register enrols a ticket that takes grants with the route r, before its
// node is made.
func (t *ticket) register(r *grantRoute) {
	t.route, t.gch = r, make(chan string, 1)
	r.mu.Lock()
	r.waiting[uuidOf(t.prefix)] = t.gch
	r.mu.Unlock()
}

// unregister ends the ticket's enrolment with its route (or its pin on
// one: see warmRoute), and deletes, without waiting, a grant it received
// that no release deleted: it is a message, not the holding (the ticket's
// node is).
func (t *ticket) unregister() {
	if t.pin != nil {
		t.pin.drop(t.q.s)
		t.pin = nil
	}
	r := t.route
	if r == nil {
		return
	}
	defer t.q.s.unroute(r)
	r.mu.Lock()
	delete(r.waiting, uuidOf(t.prefix))
	select {
	case p := <-t.gch:
		t.took(p)
	default:
	}
	r.mu.Unlock()
	if t.grant != "" {
		t.q.s.c.DeleteAsync(t.grant, -1)
		t.grant = ""
	}
	t.route, t.gch = nil, nil
}

// granted reads a grant that came, without waiting, and reports whether
// the ticket was granted: then t.grant and t.run are set.
func (t *ticket) granted() bool {
	if t.route == nil {
		return false
	}
	if t.grant == "" {
		t.route.pump()
		select {
		case p := <-t.gch:
			t.took(p)
		default:
		}
	}
	return t.grant != ""
}

// took records the grant at p: the run is in its name, after the UUID.
func (t *ticket) took(p string) {
	t.grant = p
	t.setRun(strings.Split(path.Base(p), "+")[1:])
}

// successors sets the heirs a holder finds in a listing (none for a
// reader, which cannot know whether other readers hold). The heir and its
// run (t.run): the contenders right after it that take grants, of its own
// kind, nearest first, up to maxRun + 1, ending before the first that does
// not. An RWMutex writer's run may end with readers: when the next
// contender after the writers is a reader, the run goes on with every
// reader that takes grants before the next contender that is not a
// reader, up to maxReaders (the readers between that do not take grants
// list, as always); the last writer of the run grants those readers all at
// once, or the holder itself does, when no writer comes first (t.readers).
// Either way no heir can be blocked by anyone but its granter: the listing
// showed every node between, a node made later sorts after, and a reader
// is blocked only by earlier writers.
func (t *ticket) successors(kids []string) {
	if t.kind.reader {
		return
	}
	me, _ := parseContender(t.name, t.q.kinds)
	var after []contender
	for _, k := range kids {
		if c, ok := parseContender(k, t.q.kinds); ok && c.seq > me.seq {
			after = append(after, c)
		}
	}
	slices.SortFunc(after, func(a, b contender) int { return int(a.seq) - int(b.seq) })
	var run []string
	for _, c := range after {
		if len(run) == maxRun+1 || !takesGrants(c.name, t.kind) {
			break
		}
		run = append(run, c.name)
	}
	if t.kind == writerKind && len(run) <= maxRun && len(after) > len(run) && after[len(run)].reader {
		n := len(run)
		for _, c := range after[n:] {
			if !c.reader || len(run)-n == maxReaders {
				break
			}
			if takesGrants(c.name, readerKind) {
				run = append(run, c.name)
			}
		}
	}
	t.setRun(run)
}

// setRun sets the heirs the ticket knows (see successors): readers only,
// which it grants all at once, or a writer and the run it passes on.
func (t *ticket) setRun(run []string) {
	t.run, t.readers = run, nil
	if len(run) > 0 {
		if c, ok := parseContender(run[0], t.q.kinds); ok && c.reader {
			t.readers, t.run = run, nil
		}
	}
}

// grantOps returns the operations that hand the lock to the ticket's heir
// (or heirs: readers) and delete the grant it received, to go before the
// delete of its node in one multi; none if there is nothing to grant or
// clean up. Each heir is a pair, check and create, at the front; heirs
// says how many.
func (t *ticket) grantOps() (ops []zkclient.Op, heirs int) {
	t.granted() // the latest word on a grant received
	s := t.q.s
	grant := func(heir, name string) {
		u := uuidOf(heir)
		ops = append(ops,
			s.c.CheckOp(t.q.dir+"/"+heir, -1),
			s.c.CreateOp(t.q.dir+grantsSuffix+"/"+keyOf(u)+"/"+name, nil, zkclient.Ephemeral, s.acl))
	}
	if len(t.run) > 0 {
		grant(t.run[0], strings.Join(append([]string{uuidOf(t.run[0])}, t.run[1:]...), "+"))
	}
	for _, r := range t.readers {
		grant(r, uuidOf(r))
	}
	heirs = len(ops) / 2
	if t.grant != "" {
		ops = append(ops, s.c.DeleteOp(t.grant, -1))
	}
	return ops, heirs
}

// handOff sends one multi: ops, the ticket's grant operations for heirs
// heirs (from grantOps), then tail, and behind it the request that behind
// sends, if any. When a grant operation fails (an heir left, its grants
// directory is gone, the grant received is gone with its granter's
// session) it is sent again without that part (that heir's pair). It
// returns tail's results and the multi's zxid; an error is the multi's (a
// lost answer, say), and a failure in tail is in its result.
func (t *ticket) handOff(ctx context.Context, ops []zkclient.Op, heirs int, behind func(), tail ...zkclient.Op) ([]zkclient.OpResult, int64, error) {
	s := t.q.s
	for {
		call := s.c.MultiAsync(append(slices.Clip(ops), tail...)...)
		if behind != nil {
			behind()
		}
		res, err := call.Wait(ctx)
		if err != nil {
			return nil, 0, err
		}
		failed := slices.IndexFunc(res, func(r zkclient.OpResult) bool {
			return r.Err != nil && !errors.Is(r.Err, zkclient.ErrRuntimeInconsistency)
		})
		switch {
		case failed < 0:
			if heirs > 0 {
				s.stats.grants.Add(1)
			}
			t.grant = "" // deleted, or found gone
			return res[len(ops):], call.Zxid(), nil
		case failed >= len(ops):
			return res[len(ops):], call.Zxid(), nil
		case failed < 2*heirs:
			at := failed / 2 * 2
			ops, heirs = slices.Delete(slices.Clone(ops), at, at+2), heirs-1
		default:
			ops = ops[:len(ops)-1]
		}
	}
}

// release deletes the ticket's node, granting the lock to its heir in the
// same multi when it holds and knows one, and deleting the grant it
// received (see handOff). When the multi's answer is lost, or it finds the
// node gone, it ends as leave does. A ticket that does not hold grants
// nothing, so every ticket can leave through release.
func (t *ticket) release(ctx context.Context) error {
	defer t.unregister()
	ops, heirs := t.grantOps()
	if len(ops) == 0 {
		return t.leave(ctx)
	}
	s := t.q.s
	if s.Err() != nil {
		return s.Err()
	}
	cctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	s.stats.deletes.Add(1)
	res, _, err := t.handOff(cctx, ops, heirs, nil, s.c.DeleteOp(t.path(), -1))
	if err == nil && res[0].Err == nil {
		return nil
	}
	return t.leave(ctx)
}
