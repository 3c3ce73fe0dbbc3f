package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/interop"
)

// pathTracker records which contender believes it holds each path.
type pathTracker struct {
	t       *testing.T
	mu      sync.Mutex
	holders map[string]string
}

func (p *pathTracker) enter(who string, paths []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range paths {
		if h, ok := p.holders[q]; ok {
			p.t.Errorf("%s holds %s while %s does", who, q, h)
		}
		p.holders[q] = who
	}
}

func (p *pathTracker) leave(paths []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range paths {
		delete(p.holders, q)
	}
}

// TestMultiLockContention: 6 MultiLocks on overlapping subsets of 4 paths,
// each given its paths in a random order, and a plain Mutex on one of them,
// take turns: no path ever has two holders, and every round completes (a
// MultiLock that took its paths in the given order would deadlock here).
func TestMultiLockContention(t *testing.T) {
	e := newEnv(t)
	const contenders, rounds = 6, 8
	all := []string{e.path + "/p0", e.path + "/p1", e.path + "/p2", e.path + "/p3"}
	ctx := ctxTimeout(t, time.Minute)
	tr := &pathTracker{t: t, holders: map[string]string{}}
	var wg sync.WaitGroup
	for i := range contenders {
		ps := append([]string(nil), all...)
		rand.Shuffle(len(ps), func(a, b int) { ps[a], ps[b] = ps[b], ps[a] })
		ps = ps[:2+i%3]
		m := zkrecipes.NewMultiLock(e.session(), ps)
		who := fmt.Sprintf("multilock-%d %v", i, ps)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !check(t, m.Lock(ctx), "%s: Lock", who) {
					return
				}
				tr.enter(who, ps)
				for _, p := range ps {
					if m.Token(p) == 0 {
						t.Errorf("%s: Token(%s) = 0 while held", who, p)
					}
				}
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				tr.leave(ps)
				check(t, m.Unlock(ctx), "%s: Unlock", who)
			}
		}()
	}
	plain := zkrecipes.NewMutex(e.session(), all[2])
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			if !check(t, plain.Lock(ctx), "plain: Lock") {
				return
			}
			tr.enter("plain mutex", all[2:3])
			time.Sleep(time.Millisecond)
			tr.leave(all[2:3])
			check(t, plain.Unlock(ctx), "plain: Unlock")
		}
	}()
	wg.Wait()
	for _, p := range all {
		e.empty(p)
	}
}

// TestMultiLockCancel: a MultiLock that cannot get one of its paths gives
// back what it took, whether its context ends (Lock) or it must not wait
// (TryLock), leaving no node; once free it takes all, refuses a second
// Lock, and Unlock releases all.
func TestMultiLockCancel(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p0, p1, p2 := e.path+"/p0", e.path+"/p1", e.path+"/p2"
	blocker := zkrecipes.NewMutex(e.session(), p1)
	must(t, blocker.Lock(ctx), "blocker: Lock")
	s := e.session()
	m := zkrecipes.NewMultiLock(s, []string{p2, p0, p1, p0})
	if got := m.Paths(); strings.Join(got, " ") != strings.Join([]string{p0, p1, p2}, " ") {
		t.Errorf("Paths() = %v, want sorted and distinct", got)
	}

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := m.Lock(cctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with %s held elsewhere = %v, want DeadlineExceeded", p1, err)
	}
	e.empty(p0)
	e.empty(p2)
	if n := len(e.children(p1)); n != 1 {
		t.Errorf("%d nodes under %s after the cancelled Lock, want the blocker's only", n, p1)
	}
	closed(t, m.Lost(), "Lost while not held")
	if err := m.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Unlock after a failed Lock = %v, want ErrNotHeld", err)
	}

	if err := m.TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Fatalf("TryLock with %s held elsewhere = %v, want ErrLocked", p1, err)
	}
	e.empty(p0)
	e.empty(p2)

	// A waiting Lock takes all once the blocker lets go.
	done := async(func() error { return m.Lock(ctx) })
	e.waitFor("the MultiLock to queue on "+p1, func() bool { return len(e.children(p1)) == 2 })
	if len(e.children(p0)) != 1 || len(e.children(p2)) != 0 {
		t.Errorf("while waiting for %s: nodes %v under %s and %v under %s, want one and none", p1, e.children(p0), p0, e.children(p2), p2)
	}
	must(t, blocker.Unlock(ctx), "blocker: Unlock")
	must(t, result(t, done, "Lock"), "Lock once free")
	for _, p := range []string{p0, p1, p2} {
		if n := len(e.children(p)); n != 1 || m.Token(p) == 0 {
			t.Errorf("%s: %d nodes, token %d; want one node and a token", p, n, m.Token(p))
		}
	}
	if m.Token(e.path+"/other") != 0 {
		t.Error("Token of a path not in the MultiLock is not 0")
	}
	if err := m.Lock(ctx); !errors.Is(err, zkrecipes.ErrBusy) {
		t.Errorf("second Lock = %v, want ErrBusy", err)
	}
	if err := zkrecipes.NewMultiLock(e.session(), []string{p2}).TryLock(ctx); !errors.Is(err, zkrecipes.ErrLocked) {
		t.Errorf("another MultiLock's TryLock of %s = %v, want ErrLocked", p2, err)
	}
	lost := m.Lost()
	select {
	case <-lost:
		t.Fatal("Lost closed while held")
	default:
	}
	must(t, m.Unlock(ctx), "Unlock")
	closed(t, lost, "Lost after Unlock")
	for _, p := range []string{p0, p1, p2} {
		e.empty(p)
	}

	if err := zkrecipes.NewMultiLock(s, nil).Lock(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Lock of no path = %v, want ErrInvalidArgument", err)
	}
	if err := zkrecipes.NewMultiLock(s, []string{p0, "bad"}).Lock(ctx); !errors.Is(err, zkrecipes.ErrInvalidPath) {
		t.Errorf("Lock with a bad path = %v, want ErrInvalidPath", err)
	}
}

// TestMultiLockLoss: Lost closes when the session expires (and Unlock then
// says so); a session that expires while a Lock waits for its second path
// fails that Lock and leaves nothing; Lost closes when any one of the locks
// ends; and, where a Mutex's Lost closes when
// another client deletes its node, so does the MultiLock's.
func TestMultiLockLoss(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p0, p1 := e.path+"/p0", e.path+"/p1"

	sa := e.session()
	a := zkrecipes.NewMultiLock(sa, []string{p0, p1})
	must(t, a.Lock(ctx), "a: Lock")
	e.expire(sa)
	closed(t, a.Lost(), "Lost after expiry")
	if err := a.Unlock(ctx); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Unlock after expiry = %v, want ErrSessionExpired", err)
	}

	blocker := zkrecipes.NewMutex(e.session(), p1)
	must(t, blocker.Lock(ctx), "blocker: Lock")
	sb := e.session()
	b := zkrecipes.NewMultiLock(sb, []string{p1, p0})
	done := async(func() error { return b.Lock(ctx) })
	e.waitFor("b to hold p0 and queue on p1", func() bool { return len(e.children(p0)) == 1 && len(e.children(p1)) == 2 })
	e.expire(sb)
	if err := result(t, done, "b's Lock"); !errors.Is(err, zkrecipes.ErrSessionExpired) {
		t.Errorf("Lock whose session expired while waiting = %v, want ErrSessionExpired", err)
	}
	e.empty(p0)
	must(t, blocker.Unlock(ctx), "blocker: Unlock")
	e.empty(p1)

	// One of the locks ends on its own (here: its Mutex is unlocked
	// behind the MultiLock's back): the MultiLock's Lost closes.
	c := zkrecipes.NewMultiLock(e.session(), []string{p0, p1})
	must(t, c.Lock(ctx), "c: Lock")
	must(t, zkrecipes.MultiLockMutex(c, p1).Unlock(ctx), "unlock c's Mutex on p1")
	closed(t, c.Lost(), "Lost after one lock ended")
	if err := c.Unlock(ctx); !errors.Is(err, zkrecipes.ErrNotHeld) {
		t.Errorf("Unlock with one lock gone = %v, want ErrNotHeld for that one", err)
	}
	e.empty(p0)

	// A node deleted by someone else ends that Mutex's holding, and so
	// the MultiLock's.
	d := zkrecipes.NewMultiLock(e.session(), []string{p0, p1})
	must(t, d.Lock(ctx), "d: Lock")
	must(t, e.admin.Delete(p1+"/"+e.children(p1)[0], -1), "delete d's node on p1")
	closed(t, d.Lost(), "Lost after one of the nodes was deleted")
	must(t, d.Unlock(ctx), "d: Unlock")
	e.empty(p0)
	e.empty(p1)
}

// TestMultiLockLostWhileWaiting: a lock a MultiLock took is lost (another
// client deletes its node) while the MultiLock waits for its next path.
// When Lock then returns, its Lost is closed already, as a Mutex's is when
// its holding is void at its grant: a caller that looks at Lost right after
// Lock must not take a lost lock for a live one. The fault suite found it
// (seed 247421059463653): a MultiLock whose session's Close had begun while
// it waited was granted its last path; its first holding was void, yet its
// Lost was still open when Lock returned, and its fenced write went out.
//
// Fails if the MultiLock's Lost is closed only after Lock returns (by a
// goroutine watching its Mutexes'): Lock's goroutine looks at Lost before
// it can yield to another, GOMAXPROCS being 1 meanwhile.
func TestMultiLockLostWhileWaiting(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	p0, p1 := e.path+"/p0", e.path+"/p1"
	blocker := zkrecipes.NewMutex(e.session(), p1)
	must(t, blocker.Lock(ctx), "blocker: Lock")
	m := zkrecipes.NewMultiLock(e.session(), []string{p0, p1})
	done := async(func() error { return lockLost(ctx, m) })
	e.waitFor("m to hold p0 and queue on p1", func() bool { return len(e.children(p0)) == 1 && len(e.children(p1)) == 2 })
	must(t, e.admin.Delete(p0+"/"+e.children(p0)[0], -1), "delete m's node on p0")
	closed(t, zkrecipes.MultiLockMutex(m, p0).Lost(), "Lost of m's Mutex on p0 after its node was deleted")
	procs := runtime.GOMAXPROCS(1)
	must(t, blocker.Unlock(ctx), "blocker: Unlock")
	err := result(t, done, "m's Lock")
	runtime.GOMAXPROCS(procs)
	must(t, err, "m: Lock after p1 was let go")
	must(t, m.Unlock(ctx), "m: Unlock")
	e.empty(p0)
	e.empty(p1)
}

// lockLost locks m and, if it then holds, fails unless its Lost is closed
// already, with no chance for another goroutine to run in between: for
// tests in which one of m's locks was lost while it waited.
func lockLost(ctx context.Context, m *zkrecipes.MultiLock) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	select {
	case <-m.Lost():
		return nil
	default:
		return errors.New("Lock returned holding a lock lost while it waited, and Lost is open")
	}
}

// TestMultiLockInterop runs Curator's InterProcessMultiLock and zkrecipes'
// MultiLock on overlapping sets of paths at the same time (Curator given
// its paths sorted, as MultiLock takes them). Every holder marks each path
// it holds in a shared directory; two holders of one path is a violation.
func TestMultiLockInterop(t *testing.T) {
	e, ctx, curator := interopEnv(t)
	const rounds = 6
	p := func(i int) string { return fmt.Sprintf("%s/lock-%d", e.path, i) }
	marker, start := t.TempDir(), filepath.Join(t.TempDir(), "start")
	var cmds []*exec.Cmd
	for i, set := range [][]string{{p(0), p(1)}, {p(1), p(2)}, {p(0), p(1), p(2)}} {
		cmds = append(cmds, curator(ctx, argv(t, interop.Args{
			Connect: strings.Join(e.servers, ","), Path: strings.Join(set, ","), Recipe: "multilock",
			Count: rounds, Hold: 5 * time.Millisecond, Marker: marker, ID: fmt.Sprintf("curator-%d", i),
			StartFile: start,
		})...))
	}
	procs := startReady(t, cmds...)
	must(t, os.WriteFile(start, nil, 0o644), "start barrier")

	var wg sync.WaitGroup
	for i, set := range [][]string{{p(2), p(0)}, {p(2), p(1), p(0)}} {
		m := zkrecipes.NewMultiLock(e.session(), set)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range rounds {
				if !check(t, m.Lock(ctx), "zkrecipes-%d: Lock", i) {
					return
				}
				var dirs []string
				for _, q := range set {
					dir := filepath.Join(marker, strings.ReplaceAll(q, "/", "_"))
					check(t, os.MkdirAll(dir, 0o755), "marker dir")
					if err := markExclusive(dir); err != nil {
						t.Errorf("zkrecipes-%d round %d, %s: %v", i, n, q, err)
					}
					dirs = append(dirs, dir)
				}
				time.Sleep(5 * time.Millisecond)
				for _, dir := range dirs {
					os.Remove(filepath.Join(dir, "exclusive"))
				}
				check(t, m.Unlock(ctx), "zkrecipes-%d: Unlock", i)
			}
		}()
	}
	wg.Wait()
	for _, proc := range procs {
		proc.wait(t)
	}
	for i := range 3 {
		e.empty(p(i))
	}
}
