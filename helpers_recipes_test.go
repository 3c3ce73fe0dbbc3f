package zkrecipes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// async runs f on its own goroutine and delivers its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// result waits for an async call to return; a call still blocked after 30s
// fails the test.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked after 30s", what)
		return nil
	}
}

// blocked fails the test if an async call has already returned.
func blocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (err=%v) but should still be waiting", what, err)
	default:
	}
}

// closed waits up to 20s for ch to be closed.
func closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s not closed after 20s", what)
	}
}

// roundTrip makes sure every watch event the server sent to the sessions so
// far is counted in their Stats.
func roundTrip(t *testing.T, ss ...*zkrecipes.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range ss {
		must(t, zkrecipes.RoundTrip(ctx, s), "round trip")
	}
}

// events returns each session's watch events counted so far.
func events(ss []*zkrecipes.Session) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = s.Stats().WatchEvents
	}
	return out
}

// watchersOf returns how many sessions watch the node p (four-letter word
// wchp on the server at addr).
func watchersOf(t testing.TB, addr, p string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := zktest.FourLetter(ctx, addr, "wchp")
	if err != nil {
		t.Fatalf("wchp: %v", err)
	}
	n, in := 0, false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "/"):
			in = l == p
		case in && sessionLine.MatchString(l):
			n++
		}
	}
	return n
}

var sessionLine = regexp.MustCompile(`^\s+0x[0-9a-f]+`)

// markShared claims the marker directory as a reader, as the interop
// contenders do, and returns the file to remove when leaving.
func markShared(dir, id string, n int) (string, error) {
	mine := filepath.Join(dir, fmt.Sprintf("shared-%s-%d", id, n))
	f, err := os.OpenFile(mine, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, "exclusive")); err == nil {
		return mine, errors.New("VIOLATION: a reader inside with an exclusive holder")
	}
	return mine, nil
}

// check reports err as a test error (not fatal, so it may be called from
// any goroutine) and tells whether it was nil.
func check(t *testing.T, err error, what string, args ...any) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", fmt.Sprintf(what, args...), err)
		return false
	}
	return true
}

// mkdirs creates p and its ancestors as persistent nodes (deleted with the
// test's tree at cleanup).
func (e *env) mkdirs(p string) {
	e.t.Helper()
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			_, err := e.admin.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				e.t.Fatalf("create %s: %v", p[:i], err)
			}
		}
	}
}

// afterHold returns the server's watch count once a holding just taken has
// set the watch on its own node (sent after the lock call returned), given
// the count before that lock call: a baseline for counting waiters' watches.
func (e *env) afterHold(before int) int {
	e.t.Helper()
	e.waitFor("the holder's watch on its own node", func() bool { return e.watches() >= before+1 })
	return e.watches()
}
