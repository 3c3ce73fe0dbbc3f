package zkrecipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nextWithin returns the stream's next state, waiting at most d (scaled).
func nextWithin[T any](st *zkrecipes.Stream[T], d time.Duration) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(d))
	defer cancel()
	return st.Next(ctx)
}

// anyStream is a Stream of any type, for the tests of what every stream
// promises.
type anyStream struct {
	next  func(context.Context) error
	close func()
}

func wrapStream[T any](st *zkrecipes.Stream[T], err error) (anyStream, error) {
	if err != nil {
		return anyStream{}, err
	}
	next := func(ctx context.Context) error {
		_, err := st.Next(ctx)
		return err
	}
	return anyStream{next: next, close: st.Close}, nil
}

// streamKinds opens each kind of Stream on path; watched is the node
// whose watch it holds while nothing happens.
var streamKinds = []struct {
	name    string
	open    func(ctx context.Context, s *zkrecipes.Session, path string) (anyStream, error)
	watched func(path string) string
}{
	{"Election.Observe", func(ctx context.Context, s *zkrecipes.Session, path string) (anyStream, error) {
		return wrapStream(zkrecipes.NewElection(s, path, "observer").Observe(ctx))
	}, func(p string) string { return p }},
	{"WatchGroup", func(ctx context.Context, s *zkrecipes.Session, path string) (anyStream, error) {
		return wrapStream(zkrecipes.WatchGroup(ctx, s, path))
	}, func(p string) string { return p }},
	{"Discovery.Watch", func(ctx context.Context, s *zkrecipes.Session, path string) (anyStream, error) {
		return wrapStream(zkrecipes.NewDiscovery(s, path).Watch(ctx, "web"))
	}, func(p string) string { return p + "/web" }},
	{"SharedCount.Watch", func(ctx context.Context, s *zkrecipes.Session, path string) (anyStream, error) {
		return wrapStream(zkrecipes.NewSharedCount(s, path, 0).Watch(ctx))
	}, func(p string) string { return p }},
}

// TestStreamBadArgument: an invalid path or name is an error at the call,
// not a stream that ends at once.
func TestStreamBadArgument(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := e.session()
	for _, k := range streamKinds {
		if _, err := k.open(ctx, s, "/x//y"); !errors.Is(err, zkrecipes.ErrInvalidPath) {
			t.Errorf("%s of a bad path = %v, want ErrInvalidPath", k.name, err)
		}
	}
	if _, err := zkrecipes.NewDiscovery(s, e.path).Watch(ctx, "a/b"); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Discovery.Watch of a bad service name = %v, want ErrInvalidArgument", err)
	}
	if _, err := zkrecipes.NewElection(s, e.path+"/e", "").Observe(ctx); !errors.Is(err, zkrecipes.ErrInvalidArgument) {
		t.Errorf("Observe of an election with an empty id = %v, want ErrInvalidArgument", err)
	}
}

// TestStreamSessionClosed: once the session is closed, every stream's Next
// returns, at every call, an error that says so.
func TestStreamSessionClosed(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	for _, k := range streamKinds {
		s := e.session()
		st, err := k.open(ctx, s, e.path+"/"+k.name)
		must(t, err, "%s", k.name)
		must(t, st.next(ctx), "%s: first Next", k.name)
		s.Close()
		for range 2 {
			if err := st.next(ctx); !errors.Is(err, zkrecipes.ErrSessionClosed) {
				t.Errorf("%s: Next after the session closed = %v, want ErrSessionClosed", k.name, err)
			}
		}
		st.close()
		if err := st.next(ctx); !errors.Is(err, zkrecipes.ErrSessionClosed) {
			t.Errorf("%s: Next after the session closed, then Close = %v; want ErrSessionClosed still", k.name, err)
		}
	}
}

// TestStreamClose: Close ends a Next that waits for a change, every later
// Next returns ErrStreamClosed, and the stream's watch is removed from the
// server.
func TestStreamClose(t *testing.T) {
	e := newEnv(t)
	ctx := ctxTimeout(t, time.Minute)
	s := e.session()
	for _, k := range streamKinds {
		path := e.path + "/" + k.name
		st, err := k.open(ctx, s, path)
		must(t, err, "%s", k.name)
		must(t, st.next(ctx), "%s: first Next", k.name)
		e.waitFor(k.name+"'s watch", func() bool { return watchersOf(t, e.servers[0], k.watched(path)) == 1 })
		pending := async(func() error { return st.next(context.Background()) })
		blocked(t, pending, k.name+": Next with nothing new")
		st.close()
		if err := result(t, pending, k.name+": Next pending at Close"); !errors.Is(err, zkrecipes.ErrStreamClosed) {
			t.Errorf("%s: Next pending at Close = %v, want ErrStreamClosed", k.name, err)
		}
		if err := st.next(ctx); !errors.Is(err, zkrecipes.ErrStreamClosed) {
			t.Errorf("%s: Next after Close = %v, want ErrStreamClosed", k.name, err)
		}
		st.close() // again: nothing
		e.waitFor(k.name+"'s watch removed", func() bool { return watchersOf(t, e.servers[0], k.watched(path)) == 0 })
	}
}
