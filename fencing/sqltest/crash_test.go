package sqltest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// crash plays the scenario fencing exists for, within this process (the
// pause tests, pause_test.go, run A in a process of its own and stop it
// for real). Holder A takes a lock and writes with its token; B queues.
// Then A pauses: it does nothing while the server expires its session. With silent, A's link goes silent (a
// blackholing proxy: nothing passes, nothing is closed) and the server
// expires the session once its timeout (2 s) has passed unheard; without,
// zktest.ExpireSession has the server expire it at once. B is granted the
// lock and writes with its token. crash returns both tokens and A's lock,
// and the caller has A resume and write as if nothing happened.
func crash(t *testing.T, silent bool, write func(who string, token int64) error) (a *zkrecipes.Mutex, tokenA, tokenB int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
	defer cancel()
	path := "/fencing-test/" + unique("lock")
	// A's short session timeout has its client told of the expiry soon
	// (pings every third of it), for the tests that look at A's Lost.
	servers := zkAddrs(t)
	var proxy *zktest.Proxy
	if silent {
		proxy = zktest.NewProxyT(t, zk.Addr(0))
		servers = []string{proxy.Addr()}
	}
	sA := zkSession(t, servers, zkrecipes.WithClientOptions(zkclient.WithSessionTimeout(2*time.Second)))
	sB := zkSession(t, zkAddrs(t))
	a, b := zkrecipes.NewMutex(sA, path), zkrecipes.NewMutex(sB, path)
	if err := a.Lock(ctx); err != nil {
		t.Fatalf("A: Lock: %v", err)
	}
	tokenA = a.Token()
	if err := write("A", tokenA); err != nil {
		t.Fatalf("A's write with token %d while holding: %v", tokenA, err)
	}
	bLocked := make(chan error, 1)
	go func() { bLocked <- b.Lock(ctx) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(10*time.Second))
		defer cancel()
		b.Unlock(ctx)
	})

	// A pauses; the server expires its session.
	if silent {
		proxy.Blackhole()
	} else {
		id, pw := sA.Credentials()
		if err := zktest.ExpireSession(ctx, zk.Addr(0), id, pw); err != nil && !errors.Is(err, zktest.ErrNoSession) {
			t.Fatalf("expire A's session: %v", err)
		}
	}
	if err := <-bLocked; err != nil {
		t.Fatalf("B: Lock after A's expiry: %v", err)
	}
	if silent {
		// A's client may now hear that its session is gone; A itself
		// does not look before its late write.
		proxy.Pass()
	}
	tokenB = b.Token()
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not above A's %d", tokenB, tokenA)
	}
	if err := write("B", tokenB); err != nil {
		t.Fatalf("B's write with token %d: %v", tokenB, err)
	}
	return a, tokenA, tokenB
}

// TestCrashSQL: A's link goes silent (a partition, where TestPauseSQL
// stops A's process) past its session timeout; A resumes after B took the
// lock and wrote; A's write, fenced with its old token in the same
// transaction, is refused by PostgreSQL and changes nothing.
func TestCrashSQL(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	db := openPostgres(t)
	fence, accounts := newTable(t, db, fencing.PostgreSQL)
	write := func(who string, token int64) error {
		return fence.Write(ctx, db, nil, "acct-1", token, setOwner(ctx, fencing.PostgreSQL, accounts, "acct-1", who))
	}
	_, tokenA, tokenB := crash(t, true, write)

	err := write("A (late)", tokenA)
	var stale *fencing.StaleError
	if !errors.As(err, &stale) || stale.Token != tokenA || stale.Highest != tokenB {
		t.Fatalf("A's late write with token %d: %v; want refused, B's token %d the highest", tokenA, err, tokenB)
	}
	if o := owner(t, db, accounts, "acct-1"); o != "B" {
		t.Fatalf("owner after A's late write: %q, want B", o)
	}
}

// registerDir makes a directory for a test's registers, deleted at the
// end of the test.
func registerDir(t *testing.T, s *zkrecipes.Session) string {
	t.Helper()
	ctx := context.Background()
	dir := "/fencing-test/" + unique("register")
	if err := s.CreateParents(ctx, dir+"/x", zkclient.Persistent, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.DeleteTree(context.Background(), dir); err != nil {
			t.Errorf("delete %s: %v", dir, err)
		}
	})
	return dir
}

// TestCrashRegister: the same with a fenced register in ZooKeeper, what
// zkr demo crash shows. The register is written through a session of its
// own (A's late write would come through a new one: its lock's is gone),
// and it refuses A's late write.
func TestCrashRegister(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	s := zkSession(t, zkAddrs(t))
	reg := fencing.NewRegister(s, registerDir(t, s)+"/reg", nil)
	write := func(who string, token int64) error { return reg.Write(ctx, token, []byte(who)) }
	_, tokenA, tokenB := crash(t, false, write)

	err := write("A (late)", tokenA)
	var stale *fencing.StaleError
	if !errors.As(err, &stale) || *stale != (fencing.StaleError{Resource: reg.Path(), Token: tokenA, Highest: tokenB}) {
		t.Fatalf("A's late write with token %d: %v; want refused, B's token %d the highest", tokenA, err, tokenB)
	}
	if tok, v, err := reg.Read(ctx); err != nil || tok != tokenB || string(v) != "B" {
		t.Fatalf("register after A's late write: %d %q, %v; want %d \"B\"", tok, v, err, tokenB)
	}
}

// TestRegister: a register reads empty before its first write, accepts a
// token equal to or above its own, refuses a lower one and no token, and
// concurrent writers (through a Session and a bare zkclient.Client) end
// with the highest token's value: the check and the write are one.
func TestRegister(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	s := zkSession(t, zkAddrs(t))
	p := registerDir(t, s) + "/reg"
	reg := fencing.NewRegister(s, p, nil)
	if tok, v, err := reg.Read(ctx); err != nil || tok != 0 || v != nil {
		t.Fatalf("Read before any write: %d %q, %v; want 0, nil", tok, v, err)
	}
	for _, w := range []struct {
		token int64
		value string
	}{{3, "first"}, {3, "same holder, again"}, {4, "with spaces  and\nlines"}} {
		if err := reg.Write(ctx, w.token, []byte(w.value)); err != nil {
			t.Fatalf("Write(%d, %q): %v", w.token, w.value, err)
		}
		if tok, v, err := reg.Read(ctx); err != nil || tok != w.token || string(v) != w.value {
			t.Fatalf("Read after Write(%d, %q): %d %q, %v", w.token, w.value, tok, v, err)
		}
	}
	if err := reg.Write(ctx, 2, []byte("late")); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("Write(2) after 4: %v, want ErrStale", err)
	}
	if err := reg.Write(ctx, 0, []byte("none")); !errors.Is(err, fencing.ErrNoToken) {
		t.Fatalf("Write(0): %v, want ErrNoToken", err)
	}

	// Concurrent writers, tokens 5..24, half through the raw client.
	regs := []*fencing.Register{reg, fencing.NewRegister(s.Client(), p, nil)}
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			tok := int64(5 + i)
			err := regs[i%2].Write(ctx, tok, []byte(strconv.FormatInt(tok, 10)))
			var stale *fencing.StaleError
			if errors.As(err, &stale) && stale.Highest > tok {
				err = nil
			}
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if tok, v, err := reg.Read(ctx); err != nil || tok != 24 || string(v) != "24" {
		t.Fatalf("after concurrent writes of 5..24: %d %q, %v; want 24 \"24\"", tok, v, err)
	}

	// Something that is not a register is reported, not overwritten.
	if _, err := s.Set(ctx, p, []byte("junk"), -1); err != nil {
		t.Fatal(err)
	}
	if err := reg.Write(ctx, 30, []byte("x")); err == nil || !strings.Contains(err.Error(), "junk") {
		t.Fatalf("Write over a node holding junk: %v, want an error naming it", err)
	}
}
