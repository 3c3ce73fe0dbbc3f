package zkrecipes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// Tests of the handoff at release (issue 23): a holder that knows its next
// contenders grants them the line in the multi that deletes its node, and
// they hold without listing.
//
// A holder knows its heirs from its own listings only: the one it took when
// it found itself first (after its predecessor's node went), or the one a
// waiter takes when it sees its predecessor granted (lookAhead). The tests
// arrange for the listings they need by queueing contenders one at a time
// and letting a leading holder release by a plain delete, so that the next
// holder lists with its heirs already queued.

// queued is one contender queued on a lock by enqueue.
type queued struct {
	s      *zkrecipes.Session
	node   string // its node's name
	done   <-chan error
	cancel context.CancelFunc
}

// enqueue starts lock (a Lock or RLock on a session of the test's) with a
// context of its own and waits until its node is on the server and the
// server holds watches more watches on the test's nodes (a waiter sets
// two: on its predecessor and on its own node); it returns the contender
// with its node's name.
func (e *env) enqueue(ctx context.Context, dir string, s *zkrecipes.Session, lock func(context.Context) error, watches int) *queued {
	e.t.Helper()
	before := e.children(dir)
	cctx, cancel := context.WithCancel(ctx)
	e.t.Cleanup(cancel)
	q := &queued{s: s, cancel: cancel}
	q.done = async(func() error { return lock(cctx) })
	e.waitWatches("a contender to queue and watch", watches)
	for _, k := range e.children(dir) {
		if !slices.Contains(before, k) {
			q.node = k
		}
	}
	if q.node == "" {
		e.t.Fatalf("no new node under %s after a contender queued", dir)
	}
	blocked(e.t, q.done, "a queued contender's lock")
	return q
}

// stat reads a node's Stat.
func (e *env) stat(p string) zkclient.Stat {
	e.t.Helper()
	_, st, err := e.admin.Get(p)
	must(e.t, err, "get %s", p)
	return st
}

// TestGrantChain hands a mutex down a chain of three: H, which listed the
// line with A and B queued behind it, grants A; A, which knows B, grants B.
// Each grant is the only way the next holder learns it holds: A neither
// lists nor reads for the handoff, and each token is above the last.
//
// Fails if release deletes without granting (Granted stays 0, A lists), if
// a granted waiter lists before holding, or if the token is not the own
// node's czxid (A's token then is not above H's, or not A's node's).
func TestGrantChain(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	f := zkrecipes.NewMutex(e.session(), lock)
	base := e.lockBase(ctx, f.Lock, "f: Lock")
	mutex := func(s *zkrecipes.Session) (*zkrecipes.Mutex, *zkrecipes.Session) {
		return zkrecipes.NewMutex(s, lock), s
	}

	mh, sh := mutex(e.session())
	h := e.enqueue(ctx, lock, sh, mh.Lock, base+2)
	mx, sx := mutex(e.session())
	x := e.enqueue(ctx, lock, sx, mx.Lock, base+4)
	ma, sa := mutex(e.session())
	a := e.enqueue(ctx, lock, sa, ma.Lock, base+6)
	mb, sb := mutex(e.session())
	b := e.enqueue(ctx, lock, sb, mb.Lock, base+8)

	// x leaves: a, which watched it, lists again and learns of b (its heir).
	x.cancel()
	if err := result(t, x.done, "x's Lock"); !errors.Is(err, context.Canceled) {
		t.Fatalf("x's Lock after cancel = %v, want context.Canceled", err)
	}
	e.waitFor("a to watch h", func() bool { return watchersOf(t, e.servers[0], lock+"/"+h.node) == 2 })
	e.waitWatches("h, a and b to watch", base+6)

	// f knew no heir: a plain delete, and h lists the line: [h a b].
	must(t, f.Unlock(ctx), "f: Unlock")
	must(t, result(t, h.done, "h's Lock"), "h: Lock")
	if st := sh.Stats(); st.Granted != 0 {
		t.Errorf("h held by a grant (Granted=%d), but f knew no heir", st.Granted)
	}

	before := sa.Stats()
	must(t, mh.Unlock(ctx), "h: Unlock")
	must(t, result(t, a.done, "a's Lock"), "a: Lock")
	after := sa.Stats()
	if got := sh.Stats().Grants; got != 1 {
		t.Errorf("h sent %d grants, want 1", got)
	}
	if after.Granted != 1 {
		t.Errorf("a: Granted = %d, want 1", after.Granted)
	}
	if after.Listings != before.Listings || after.Reads != before.Reads {
		t.Errorf("a listed %d and read %d times for the handoff, want none", after.Listings-before.Listings, after.Reads-before.Reads)
	}
	if ma.Token() <= mh.Token() {
		t.Errorf("a's token %d not above h's %d", ma.Token(), mh.Token())
	}
	if czxid := e.stat(lock + "/" + a.node).Czxid; ma.Token() != czxid {
		t.Errorf("a's token %d, want its node's czxid %d", ma.Token(), czxid)
	}
	if v := e.stat(lock + "/" + a.node).Version; v != 1 {
		t.Errorf("a's node at version %d after the grant, want 1", v)
	}
	blocked(t, b.done, "b's Lock while a holds")

	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, b.done, "b's Lock"), "b: Lock")
	if st := sb.Stats(); st.Granted != 1 {
		t.Errorf("b: Granted = %d, want 1 (a knew b from its second listing)", st.Granted)
	}
	if mb.Token() <= ma.Token() {
		t.Errorf("b's token %d not above a's %d", mb.Token(), ma.Token())
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

// TestGrantChainQueuedOneByOne queues h, a and b one at a time behind f,
// and lets the lock go down the line. h lists (f knew no heir) and grants
// a. a listed the line once, when it queued, before b was there; its
// predecessor h held by a listing, not a grant, so a never looked ahead.
// Every release after f's should grant: a granted holder must learn its
// heir some other way than from a listing taken before the heir queued.
func TestGrantChainQueuedOneByOne(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	f := zkrecipes.NewMutex(e.session(), lock)
	base := e.lockBase(ctx, f.Lock, "f: Lock")
	sh, sa, sb := e.session(), e.session(), e.session()
	mh, ma, mb := zkrecipes.NewMutex(sh, lock), zkrecipes.NewMutex(sa, lock), zkrecipes.NewMutex(sb, lock)
	h := e.enqueue(ctx, lock, sh, mh.Lock, base+2)
	a := e.enqueue(ctx, lock, sa, ma.Lock, base+4)
	b := e.enqueue(ctx, lock, sb, mb.Lock, base+6)
	must(t, f.Unlock(ctx), "f: Unlock")
	must(t, result(t, h.done, "h's Lock"), "h: Lock")
	must(t, mh.Unlock(ctx), "h: Unlock")
	must(t, result(t, a.done, "a's Lock"), "a: Lock")
	if st := sa.Stats(); st.Granted != 1 {
		t.Errorf("a: Granted = %d, want 1", st.Granted)
	}
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, b.done, "b's Lock"), "b: Lock")
	if st := sb.Stats(); st.Granted != 1 {
		t.Errorf("b: Granted = %d (Listings = %d), want 1: a, granted without listing, never learned of b, so every other handoff of a line queued one at a time is a plain delete", st.Granted, st.Listings)
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

// line3 queues h, a and b behind a first holder f, and has f let go: h then
// holds, having listed the line with a and b in it (a is its heir).
func (e *env) line3(ctx context.Context, lock string, aOpts ...zkrecipes.LockOption) (mh, ma, mb *zkrecipes.Mutex, h, a, b *queued) {
	e.t.Helper()
	f := zkrecipes.NewMutex(e.session(), lock)
	base := e.lockBase(ctx, f.Lock, "f: Lock")
	sh, sa, sb := e.session(), e.session(), e.session()
	mh, ma, mb = zkrecipes.NewMutex(sh, lock), zkrecipes.NewMutex(sa, lock, aOpts...), zkrecipes.NewMutex(sb, lock)
	h = e.enqueue(ctx, lock, sh, mh.Lock, base+2)
	a = e.enqueue(ctx, lock, sa, ma.Lock, base+4)
	b = e.enqueue(ctx, lock, sb, mb.Lock, base+6)
	must(e.t, f.Unlock(ctx), "f: Unlock")
	must(e.t, result(e.t, h.done, "h's Lock"), "h: Lock")
	return
}

// TestGrantHeirLeft: the heir h listed leaves (its Lock cancelled) before h
// releases. The grant cannot be applied (a's node is gone); h's release
// falls back to a plain delete, and b, behind a, gets the lock by listing.
//
// Fails if release does not fall back when the multi fails (h's node
// stays: b never holds), or if a grant is sent to a node known gone and
// applied anyway.
func TestGrantHeirLeft(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	mh, _, mb, h, a, b := e.line3(ctx, lock)
	a.cancel()
	if err := result(t, a.done, "a's Lock"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a's Lock after cancel = %v, want context.Canceled", err)
	}
	e.waitFor("b to watch h", func() bool { return watchersOf(t, e.servers[0], lock+"/"+h.node) == 2 })
	must(t, mh.Unlock(ctx), "h: Unlock")
	must(t, result(t, b.done, "b's Lock"), "b: Lock after h let go")
	if st := b.s.Stats(); st.Granted != 0 {
		t.Errorf("b: Granted = %d, but h knew only a", st.Granted)
	}
	if mb.Token() <= mh.Token() {
		t.Errorf("b's token %d not above h's %d", mb.Token(), mh.Token())
	}
	if kids := e.children(lock); len(kids) != 1 || kids[0] != b.node {
		t.Errorf("children %v while b holds, want only b's %s", kids, b.node)
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

// TestGrantHeirExpired: the heir's session expires while it waits. h's
// Unlock still succeeds (the grant fails, or lands on a node about to go
// with its session) and b gets the lock.
//
// Fails if a failed grant makes Unlock return its error, or leaves h's
// node (b never holds).
func TestGrantHeirExpired(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	mh, _, mb, _, a, b := e.line3(ctx, lock)
	e.expire(a.s)
	if err := result(t, a.done, "a's Lock"); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("a's Lock after its session expired = %v, want ErrSessionExpired", err)
	}
	e.waitFor("a's node to go", func() bool { return !slices.Contains(e.children(lock), a.node) })
	must(t, mh.Unlock(ctx), "h: Unlock with its heir's session expired")
	must(t, result(t, b.done, "b's Lock"), "b: Lock after h let go")
	if mb.Token() <= mh.Token() {
		t.Errorf("b's token %d not above h's %d", mb.Token(), mh.Token())
	}
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

// TestGrantHolderExpired: h, which knows its heir, loses its session
// before it releases. a gets the lock the old way, by listing when h's node
// goes, with a larger token.
func TestGrantHolderExpired(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	mh, ma, mb, h, a, b := e.line3(ctx, lock)
	e.expire(h.s)
	must(t, result(t, a.done, "a's Lock"), "a: Lock after h's session expired")
	if st := a.s.Stats(); st.Granted != 0 {
		t.Errorf("a: Granted = %d after its predecessor's session expired", st.Granted)
	}
	if ma.Token() <= mh.Token() {
		t.Errorf("a's token %d not above h's %d", ma.Token(), mh.Token())
	}
	if err := mh.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("h: Unlock after expiry = %v, want ErrSessionExpired", err)
	}
	blocked(t, b.done, "b's Lock while a holds")
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, b.done, "b's Lock"), "b: Lock")
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}

// foreign is a contender another library made, by hand on a plain session:
// it waits as kazoo and Curator do, watching the node before its own and
// listing when that goes.
type foreign struct {
	c    plain
	dir  string
	node string
}

func (e *env) foreignContender(dir, name string) *foreign {
	e.t.Helper()
	c := plainConn(e.t, e.servers)
	e.t.Cleanup(func() { c.c.Close() })
	p, err := c.Create(dir+"/"+name, nil, zkclient.EphemeralSequential, openACL)
	must(e.t, err, "create the foreign contender's node")
	return &foreign{c: c, dir: dir, node: p[len(dir)+1:]}
}

// lock waits, as kazoo's Lock does, until no contender is before its own
// node (any event of the watched node makes it list again).
func (f *foreign) lock(ctx context.Context) error {
	seq := func(n string) string { return n[len(n)-10:] }
	for {
		kids, _, err := f.c.Children(f.dir)
		if err != nil {
			return err
		}
		slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
		i := slices.Index(kids, f.node)
		if i < 0 {
			return errors.New("foreign contender's node is gone")
		}
		if i == 0 {
			return nil
		}
		_, _, w, err := f.c.c.ExistsW(ctx, f.dir+"/"+kids[i-1])
		if err != nil {
			return err
		}
		select {
		case <-w.Event():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestGrantForeignHeir puts a Curator-named and a kazoo-named contender,
// made by hand, right behind a zkrecipes holder that listed them: the
// holder never writes their nodes (a Curator or kazoo contender's data is
// its own), and they get the lock when the holder's node goes.
//
// Fails if heirNames grants nodes that are not grantable (the foreign
// node's version moves to 1).
func TestGrantForeignHeir(t *testing.T) {
	for _, c := range []struct{ name, prefix string }{
		{"curator", "_c_" + uuid.NewString() + "-lock-"}, // a version-4 UUID
		{"kazoo", randHex(16) + "__lock__"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			lock := e.path + "/lock"
			ctx := ctxTimeout(t, time.Minute)
			f := zkrecipes.NewMutex(e.session(), lock)
			base := e.lockBase(ctx, f.Lock, "f: Lock")
			sh, sb := e.session(), e.session()
			mh, mb := zkrecipes.NewMutex(sh, lock), zkrecipes.NewMutex(sb, lock)
			h := e.enqueue(ctx, lock, sh, mh.Lock, base+2)
			fc := e.foreignContender(lock, c.prefix)
			fdone := async(func() error { return fc.lock(ctx) })
			e.waitWatches("the foreign contender to watch h", base+3)
			b := e.enqueue(ctx, lock, sb, mb.Lock, base+5)
			must(t, f.Unlock(ctx), "f: Unlock")
			must(t, result(t, h.done, "h's Lock"), "h: Lock")
			must(t, mh.Unlock(ctx), "h: Unlock")
			must(t, result(t, fdone, "the foreign contender's lock"), "foreign: lock")
			if st := sh.Stats(); st.Grants != 0 {
				t.Errorf("h sent %d grants with a foreign contender next", st.Grants)
			}
			if v := e.stat(lock + "/" + fc.node).Version; v != 0 {
				t.Errorf("the foreign contender's node %s at version %d, want 0 (never written)", fc.node, v)
			}
			blocked(t, b.done, "b's Lock while the foreign contender holds")
			must(t, fc.c.Delete(lock+"/"+fc.node, -1), "foreign: unlock")
			must(t, result(t, b.done, "b's Lock"), "b: Lock")
			must(t, mb.Unlock(ctx), "b: Unlock")
			e.empty(lock)
		})
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestGrantRacesCancel races, many times over, h's grant to a against the
// cancellation of a's Lock. Either a holds (and b waits until a lets go),
// or a's Lock fails and b holds; never a and b at once, and nothing is left
// behind.
//
// Fails if a granted waiter whose Lock returns the context's error leaves
// its node (b never holds), or returns holding nothing while its node
// stays.
func TestGrantRacesCancel(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	const rounds = 20
	var won, lost int
	for i := range rounds {
		lock := fmt.Sprintf("%s/lock%d", e.path, i)
		mh, ma, mb, _, a, b := e.line3(ctx, lock)
		// The cancellation goes out from 0 to 1.5ms after the grant (a
		// round trip on loopback): early enough to beat it in some rounds,
		// late enough to lose in others.
		delay := time.Duration(i%7) * 250 * time.Microsecond
		cancelled := async(func() error {
			time.Sleep(delay)
			a.cancel()
			return nil
		})
		must(t, mh.Unlock(ctx), "round %d: h: Unlock", i)
		result(t, cancelled, "the cancellation")
		err := result(t, a.done, "a's Lock")
		switch {
		case err == nil:
			won++
			blocked(t, b.done, "b's Lock while a holds")
			if kids := e.children(lock); len(kids) != 2 || !slices.Contains(kids, a.node) {
				t.Errorf("round %d: children %v while a holds, want a's and b's", i, kids)
			}
			must(t, ma.Unlock(ctx), "round %d: a: Unlock", i)
			must(t, result(t, b.done, "b's Lock"), "round %d: b: Lock", i)
			if mb.Token() <= ma.Token() {
				t.Errorf("round %d: b's token %d not above a's %d", i, mb.Token(), ma.Token())
			}
		case errors.Is(err, context.Canceled):
			lost++
			must(t, result(t, b.done, "b's Lock"), "round %d: b: Lock after a gave up", i)
			if ma.Token() != 0 {
				t.Errorf("round %d: a holds token %d after its Lock failed", i, ma.Token())
			}
		default:
			t.Fatalf("round %d: a's Lock = %v", i, err)
		}
		if kids := e.children(lock); len(kids) != 1 || kids[0] != b.node {
			t.Errorf("round %d: children %v while b holds, want only b's %s", i, kids, b.node)
		}
		if mb.Token() <= mh.Token() {
			t.Errorf("round %d: b's token %d not above h's %d", i, mb.Token(), mh.Token())
		}
		must(t, mb.Unlock(ctx), "round %d: b: Unlock", i)
		e.empty(lock)
	}
	t.Logf("%d rounds: a held in %d, gave up in %d", rounds, won, lost)
}

// TestGrantRequeueTurns has two sessions take turns with Requeue, each
// updating a shared counter by a read and a later write (lost updates
// would show two holders inside at once); requeue grants the line to the
// other session when it knows it is next, and tokens increase throughout.
//
// Fails if requeue stops granting (only the last Unlocks grant) or a grant
// lets two hold at once.
func TestGrantRequeueTurns(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	const workers, rounds = 2, 25
	g := &guard{t: t}
	var counter atomic.Int64
	sessions := []*zkrecipes.Session{e.session(), e.session()}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := zkrecipes.NewMutex(s, lock)
			if !check(t, m.Lock(ctx), "worker %d: Lock", i) {
				return
			}
			for r := range rounds {
				g.enter(fmt.Sprintf("worker %d", i), m.Token())
				v := counter.Load()
				time.Sleep(time.Millisecond) // widen the window a second holder would write in
				counter.Store(v + 1)
				g.leave()
				op, call := "Requeue", m.Requeue
				if r == rounds-1 {
					op, call = "Unlock", m.Unlock
				}
				if !check(t, call(ctx), "worker %d round %d: %s", i, r, op) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := counter.Load(); got != workers*rounds {
		t.Errorf("counter %d after %d increments: two held at once", got, workers*rounds)
	}
	var grants, granted int64
	for _, s := range sessions {
		grants += s.Stats().Grants
		granted += s.Stats().Granted
	}
	t.Logf("%d handoffs: %d grants sent, %d received", workers*rounds, grants, granted)
	// Each requeue that knows the other worker is next grants it the line,
	// and a worker granted without knowing its heir looks in the
	// background, so nearly every handoff is a grant (the first is not:
	// nobody is queued behind the first holder when it lists), and every
	// grant sent is received as one (the heir waits for the read that
	// watches its own node before it takes its predecessor's deletion for
	// a free line).
	if want := int64(workers * rounds * 3 / 4); grants < want || granted != grants {
		t.Errorf("%d grants sent, %d received in %d handoffs, want at least %d, all received", grants, granted, workers*rounds, want)
	}
	e.empty(lock)
}

// TestGrantReaders: a writer that listed three readers and a writer behind
// it grants the three readers at once; the last writer waits until every
// reader has let go.
//
// Fails if heirNames grants only the first reader (the others list), or
// grants past the next writer (the late reader, queued behind the last
// writer, holds with it).
func TestGrantReaders(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/rw"
	ctx := ctxTimeout(t, time.Minute)
	f := zkrecipes.NewRWMutex(e.session(), lock)
	base := e.lockBase(ctx, f.Lock, "f: Lock")
	sw := e.session()
	w := zkrecipes.NewRWMutex(sw, lock)
	wq := e.enqueue(ctx, lock, sw, w.Lock, base+2)
	readers := make([]*zkrecipes.RWMutex, 3)
	rq := make([]*queued, 3)
	for i := range readers {
		s := e.session()
		readers[i] = zkrecipes.NewRWMutex(s, lock)
		rq[i] = e.enqueue(ctx, lock, s, readers[i].RLock, base+4+2*i)
	}
	sl := e.session()
	last := zkrecipes.NewRWMutex(sl, lock)
	lq := e.enqueue(ctx, lock, sl, last.Lock, base+10)
	sr := e.session()
	late := zkrecipes.NewRWMutex(sr, lock) // a reader behind the last writer
	lr := e.enqueue(ctx, lock, sr, late.RLock, base+12)

	must(t, f.Unlock(ctx), "f: Unlock")
	must(t, result(t, wq.done, "w's Lock"), "w: Lock")
	must(t, w.Unlock(ctx), "w: Unlock")
	if got := sw.Stats().Grants; got != 1 {
		t.Errorf("w sent %d grants, want 1 (one multi for the three readers)", got)
	}
	for i, r := range rq {
		must(t, result(t, r.done, "a reader's RLock"), "reader %d: RLock", i)
		if st := r.s.Stats(); st.Granted != 1 {
			t.Errorf("reader %d: Granted = %d, want 1", i, st.Granted)
		}
		if readers[i].Token() <= w.Token() {
			t.Errorf("reader %d: token %d not above the writer's %d", i, readers[i].Token(), w.Token())
		}
	}
	for i, r := range readers {
		blocked(t, lq.done, "the last writer's Lock while readers hold")
		blocked(t, lr.done, "the late reader's RLock while a writer waits")
		must(t, r.RUnlock(ctx), "reader %d: RUnlock", i)
	}
	must(t, result(t, lq.done, "the last writer's Lock"), "last: Lock")
	blocked(t, lr.done, "the late reader's RLock while the last writer holds")
	if st := sl.Stats(); st.Granted != 0 {
		t.Errorf("the last writer held by a grant (Granted=%d): a reader granted it", st.Granted)
	}
	for i, r := range readers {
		if last.Token() <= r.Token() {
			t.Errorf("the last writer's token %d not above reader %d's %d", last.Token(), i, r.Token())
		}
	}
	must(t, last.Unlock(ctx), "last: Unlock")
	must(t, result(t, lr.done, "the late reader's RLock"), "late reader: RLock")
	if late.Token() <= last.Token() {
		t.Errorf("the late reader's token %d not above the last writer's %d", late.Token(), last.Token())
	}
	must(t, late.RUnlock(ctx), "late reader: RUnlock")
	e.empty(lock)
}

// TestGrantKeepsNodeData: a grant writes the heir's node with the heir's
// own data (WithNodeData), which others inspecting the queue read.
//
// Fails if the grant writes empty data, or anything but the node's own.
func TestGrantKeepsNodeData(t *testing.T) {
	e := newEnv(t)
	lock := e.path + "/lock"
	ctx := ctxTimeout(t, time.Minute)
	mh, ma, mb, _, a, b := e.line3(ctx, lock, zkrecipes.WithNodeData([]byte("id-7")))
	must(t, mh.Unlock(ctx), "h: Unlock")
	must(t, result(t, a.done, "a's Lock"), "a: Lock")
	if st := a.s.Stats(); st.Granted != 1 {
		t.Errorf("a: Granted = %d, want 1", st.Granted)
	}
	data, st, err := e.admin.Get(lock + "/" + a.node)
	must(t, err, "get a's node")
	if string(data) != "id-7" || st.Version != 1 {
		t.Errorf("a's node after the grant: %q at version %d, want \"id-7\" at version 1", data, st.Version)
	}
	must(t, ma.Unlock(ctx), "a: Unlock")
	must(t, result(t, b.done, "b's Lock"), "b: Lock")
	must(t, mb.Unlock(ctx), "b: Unlock")
	e.empty(lock)
}
