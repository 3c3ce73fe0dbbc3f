package zkrecipes_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// Nodes the recipes create carry the session's ACL; with digest auth the
// session can use them and a client without the credentials cannot.
func TestSessionDigestAuthAndACL(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	// The ancestors are created (world-readable) by the test, so that only
	// the lock's own directory gets the restrictive ACL.
	for _, p := range []string{"/test", e.path} {
		if _, err := e.admin.Create(p, nil, zkclient.Persistent, openACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	acl := zkclient.DigestACL(zkclient.PermAll, "app", "s3cret")
	s := e.session(zkrecipes.WithClientOptions(zkclient.WithDigestAuth("app", "s3cret")), zkrecipes.WithACL(acl))
	m := zkrecipes.NewMutex(s, lock)
	must(t, m.Lock(ctx), "Lock with digest auth")
	_, _, err := e.admin.Children(lock)
	if !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("unauthenticated listing = %v, want NoAuth", err)
	}
	must(t, m.Unlock(ctx), "Unlock")

	// Another session with the same credentials shares the lock.
	other := zkrecipes.NewMutex(e.session(zkrecipes.WithClientOptions(zkclient.WithDigestAuth("app", "s3cret")), zkrecipes.WithACL(acl)), lock)
	must(t, other.Lock(ctx), "second authenticated session: Lock")
	must(t, other.Unlock(ctx), "second authenticated session: Unlock")

	// Without the credentials, the lock is out of reach: a clear error.
	err = zkrecipes.NewMutex(e.session(), lock).Lock(ctx)
	if !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("Lock without credentials = %v, want an error wrapping zkclient.ErrNoAuth", err)
	}
	must(t, e.admin.AddAuth("digest", []byte("app:s3cret")), "admin auth")
	e.empty(lock)
}

// The session's life is logged: established, suspended, reconnected.
func TestSessionLogsItsLife(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := e.proxy()
	s := e.sessionOn([]string{p.Addr()}, zkrecipes.WithLogger(log))
	p.Cut()
	e.waitFor("reconnection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(buf.String(), "reconnected")
	})
	s.Close()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"session established", "suspended", "reconnected", "session closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "reconnected") < strings.Index(out, "established") {
		t.Errorf("a reconnection logged before the session was established:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A state callback of the user's runs beside the Session's own: loss is
// still reported.
func TestSessionUserStateCallback(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	var mu sync.Mutex
	var seen []zkclient.State
	s := e.session(zkrecipes.WithClientOptions(zkclient.WithStateCallback(func(ev zkclient.StateEvent) {
		mu.Lock()
		seen = append(seen, ev.State)
		mu.Unlock()
	})))
	m := zkrecipes.NewMutex(s, e.path+"/lock")
	must(t, m.Lock(ctx), "Lock")
	e.expire(s)
	select {
	case <-m.Lost():
	case <-time.After(zktest.Bound(20 * time.Second)):
		t.Fatal("Lost not closed after expiry with a user state callback")
	}
	// Lost closes from the Session's own callback, which runs before the
	// user's; every callback has run once Done is closed.
	<-s.Done()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, zkclient.StateExpired) {
		t.Errorf("the user's callback saw %v, not the expiry", seen)
	}
}

// A session authenticated with SASL DIGEST-MD5 (against a server with a
// JAAS file) keeps its lock nodes to itself with a sasl ACL; a wrong
// password is a refusal NewSession reports at once.
func TestSessionSASL(t *testing.T) {
	cluster := zktest.StartT(t, zktest.Options{SASLUsers: map[string]string{"app": "s3cret"}})
	e := newEnvOn(t, cluster.Addrs())
	ctx := ctxTimeout(t, time.Minute)
	lock := e.path + "/lock"
	for _, p := range []string{"/test", e.path} {
		if _, err := e.admin.Create(p, nil, zkclient.Persistent, openACL); err != nil && !errors.Is(err, zkclient.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	app := zkrecipes.WithClientOptions(zkclient.WithSASL(zkclient.DigestMD5("app", "s3cret")))
	s := e.session(app, zkrecipes.WithACL(zkclient.SASLACL(zkclient.PermAll, "app")))
	m := zkrecipes.NewMutex(s, lock)
	must(t, m.Lock(ctx), "Lock with SASL")
	if _, _, err := e.admin.Children(lock); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("unauthenticated listing = %v, want NoAuth", err)
	}
	must(t, m.Unlock(ctx), "Unlock")
	if err := zkrecipes.NewMutex(e.session(), lock).Lock(ctx); !errors.Is(err, zkclient.ErrNoAuth) {
		t.Errorf("Lock without credentials = %v, want an error wrapping zkclient.ErrNoAuth", err)
	}
	if kids, _, err := s.Client().Children(ctx, lock); err != nil || len(kids) > 0 {
		t.Errorf("left under the lock: %v %v", kids, err)
	}
	// The directory is the SASL user's: delete it before the cleanup,
	// which is not authenticated.
	must(t, s.Client().Delete(ctx, lock, -1), "delete the lock's directory")

	_, err := zkrecipes.NewSession(ctx, cluster.Addrs(), zkrecipes.WithClientOptions(zkclient.WithSASL(zkclient.DigestMD5("app", "wrong"))))
	if !errors.Is(err, zkclient.ErrAuthFailed) || ctx.Err() != nil || !strings.HasPrefix(err.Error(), "zkrecipes: ") {
		t.Errorf("NewSession with a wrong password = %v, want an error wrapping zkclient.ErrAuthFailed", err)
	}
}

// Close may run while a recipe hands a clean-up to the background (a
// failed call in another goroutine): it waits for the clean-ups that
// started before it and no new one starts after it. Under -race, a
// background start racing Close's wait is reported.
func TestSessionCloseWhileCleaningUp(t *testing.T) {
	e := newEnv(t)
	for range 20 {
		s := e.sessionOn(e.servers)
		start := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-start
			for i := range 50 {
				zkrecipes.RemoveOwnLater(s, fmt.Sprintf("%s/n%d", e.path, i))
			}
		}()
		close(start)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		<-done
	}
}
