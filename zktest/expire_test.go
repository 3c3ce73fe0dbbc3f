package zktest

import (
	"errors"
	"io"
	"testing"
)

func TestExpireSession(t *testing.T) {
	checkLeaks(t)
	addr := sharedAddr(t)
	ctx := testContext(t)
	observer := connectZK(t, addr)

	path := testPath("expire-me")
	s := rawConnect(t, addr, 0, nil)
	if s.id == 0 || len(s.passwd) == 0 {
		t.Fatalf("new session: id %x, password %x", s.id, s.passwd)
	}
	if err := s.create(path, true); err != nil {
		t.Fatal(err)
	}
	if !exists(t, observer, path) {
		t.Fatal("ephemeral node missing")
	}

	if err := ExpireSession(ctx, addr, s.id, s.passwd); err != nil {
		t.Fatal(err)
	}
	if exists(t, observer, path) {
		t.Fatal("ephemeral node survived ExpireSession")
	}
	// The session's own connection was closed by the server.
	if _, err := io.ReadAll(s); err != nil {
		t.Logf("old connection: %v", err)
	}
	// Reconnecting to the session finds it expired.
	if again := rawConnect(t, addr, s.id, s.passwd); again.id != 0 {
		t.Fatalf("reconnect to expired session got id %x", again.id)
	}
	if err := ExpireSession(ctx, addr, s.id, s.passwd); !errors.Is(err, ErrNoSession) {
		t.Fatalf("second ExpireSession: %v, want ErrNoSession", err)
	}
}
