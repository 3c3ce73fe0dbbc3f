package sqltest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// sharedStore is a Store that several servers share: replicas returns two
// Stores on it, as two servers would have, each with its own connection,
// and a function that reads what the shared state holds for a resource.
type sharedStore struct {
	name     string
	replicas func(t *testing.T) (fencing.Store, fencing.Store, func(resource string) (int64, error))
}

var sharedStores = []sharedStore{
	{"ZooKeeper", func(t *testing.T) (fencing.Store, fencing.Store, func(string) (int64, error)) {
		s1, s2 := zkSession(t, zkAddrs(t)), zkSession(t, zkAddrs(t))
		dir := registerDir(t, s1)
		st := fencing.NewZooKeeperStore(s1.Client(), dir, nil)
		peek := func(resource string) (int64, error) {
			data, _, err := s1.Get(context.Background(), st.Node(resource))
			if err != nil {
				return 0, err
			}
			return strconv.ParseInt(string(data), 10, 64)
		}
		return st, fencing.NewZooKeeperStore(s2.Client(), dir, nil), peek
	}},
	{"PostgreSQL", func(t *testing.T) (fencing.Store, fencing.Store, func(string) (int64, error)) {
		db := openPostgres(t)
		fence, _ := newTable(t, db, fencing.PostgreSQL)
		peek := func(resource string) (int64, error) { return fence.Highest(context.Background(), db, resource) }
		return fence.Store(db), fence.Store(openPostgres(t)), peek
	}},
}

// guarded sends a PUT to resource with token through g, and returns the
// status and, for a 409, the highest token the answer names.
func guarded(t *testing.T, g http.Handler, resource string, token int64) (int, int64) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPut, resource, nil)
	r.Header.Set(fencing.Header, strconv.FormatInt(token, 10))
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	resp := w.Result()
	resp.Request = r
	var stale *fencing.StaleError
	if err := fencing.CheckResponse(resp); errors.As(err, &stale) {
		return resp.StatusCode, stale.Highest
	}
	return resp.StatusCode, 0
}

// TestSharedStore: two Guards, as two replicas of a service, each with its
// own connection to one shared store, refuse a token lower than one either
// of them admitted, admit an equal or higher one, and fence resources
// apart.
func TestSharedStore(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			zktest.CheckLeaks(t)
			s1, s2, _ := st.replicas(t)
			ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
			g := []http.Handler{(&fencing.Guard{Store: s1}).Wrap(ok), (&fencing.Guard{Store: s2}).Wrap(ok)}
			for i, step := range []struct {
				guard   int
				res     string
				token   int64
				status  int
				highest int64
			}{
				{0, "/acct/1", 5, 200, 0},
				{1, "/acct/1", 4, 409, 5}, // replica 2 never saw 5 itself
				{1, "/acct/1", 5, 200, 0}, // the same holding, again
				{1, "/acct/1", 7, 200, 0},
				{0, "/acct/1", 5, 409, 7}, // replica 1 last saw 5, admitted by itself
				{0, "/acct/1", 7, 200, 0},
				{0, "/acct/1", 6, 409, 7},
				{1, "/acct/2", 1, 200, 0}, // another resource, its own tokens
				{0, "/acct/2", 1, 200, 0},
				{1, "/acct/1", 8, 200, 0},
				{0, "/acct/1", 7, 409, 8},
			} {
				status, highest := guarded(t, g[step.guard], step.res, step.token)
				if status != step.status || highest != step.highest {
					t.Fatalf("step %d: replica %d, %s token %d: %d (highest %d), want %d (highest %d)",
						i, step.guard+1, step.res, step.token, status, highest, step.status, step.highest)
				}
			}
		})
	}
}

// TestSharedStoreConcurrent: goroutines on two replicas raise one
// resource's token at once, each token once, in random order. The store
// ends with the highest, every answer is the token itself or a higher
// one, and no token is admitted after a higher one was admitted and
// answered.
func TestSharedStoreConcurrent(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			zktest.CheckLeaks(t)
			ctx, cancel := context.WithTimeout(context.Background(), zktest.Bound(30*time.Second))
			defer cancel()
			s := []fencing.Store{}
			s1, s2, peek := st.replicas(t)
			s = append(s, s1, s2)
			const n = 40
			type call struct {
				token, highest int64
				start, end     time.Time
			}
			calls := make([]call, n)
			var wg sync.WaitGroup
			for i, tok := range rand.Perm(n) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := call{token: int64(tok + 1), start: time.Now()}
					h, err := s[i%2].Advance(ctx, "/shared", c.token)
					c.highest, c.end = h, time.Now()
					if err != nil {
						t.Errorf("Advance(%d): %v", c.token, err)
					}
					calls[i] = c
				}()
			}
			wg.Wait()
			for _, c := range calls {
				if c.highest < c.token {
					t.Errorf("Advance(%d) answered %d, lower", c.token, c.highest)
				}
				if c.highest != c.token {
					continue
				}
				for _, d := range calls {
					if d.highest == d.token && d.token > c.token && d.end.Before(c.start) {
						t.Errorf("token %d admitted after %d was admitted and answered", c.token, d.token)
					}
				}
			}
			if h, err := peek("/shared"); err != nil || h != n {
				t.Errorf("the store holds %d, %v after the race; want %d", h, err, n)
			}
			// Each replica accepts the highest, and then refuses the one
			// below it naming the highest. (Before, a ZooKeeperStore replica
			// may refuse it naming a lower one: the highest it knew.)
			for i, r := range s {
				if h, err := r.Advance(ctx, "/shared", n); err != nil || h != n {
					t.Errorf("replica %d: Advance(%d) after the race: %d, %v; want it accepted", i+1, n, h, err)
				}
				if h, err := r.Advance(ctx, "/shared", n-1); err != nil || h != n {
					t.Errorf("replica %d: Advance(%d) after the race: %d, %v; want refused, %d the highest", i+1, n-1, h, err, n)
				}
			}
		})
	}
}

// TestZooKeeperStore: the ZooKeeper store's own contract: a node per
// resource, named so any resource name makes one node; a replica refuses
// a token below the highest it knows without asking ZooKeeper; bad input
// and a missing directory are errors that name them.
func TestZooKeeperStore(t *testing.T) {
	zktest.CheckLeaks(t)
	ctx := context.Background()
	s := zkSession(t, zkAddrs(t))
	dir := registerDir(t, s)
	st := fencing.NewZooKeeperStore(s.Client(), dir, nil)
	if got, want := st.Node("/a b/ü.x"), dir+"/%2Fa%20b%2F%C3%BC%2Ex"; got != want {
		t.Fatalf("Node: %q, want %q", got, want)
	}
	for _, res := range []string{"/accounts/7", "", ".", "..", "zookeeper"} {
		if h, err := st.Advance(ctx, res, 3); err != nil || h != 3 {
			t.Fatalf("Advance(%q, 3): %d, %v", res, h, err)
		}
		if data, _, err := s.Get(ctx, st.Node(res)); err != nil || string(data) != "3" {
			t.Fatalf("node of %q: %q, %v; want \"3\"", res, data, err)
		}
	}
	if _, err := st.Advance(ctx, "/accounts/7", 0); !errors.Is(err, fencing.ErrNoToken) {
		t.Fatalf("Advance(0): %v, want ErrNoToken", err)
	}
	missing := fencing.NewZooKeeperStore(s.Client(), dir+"/missing", nil)
	if _, err := missing.Advance(ctx, "/x", 1); err == nil || !strings.Contains(err.Error(), dir+"/missing does not exist") {
		t.Fatalf("Advance in a missing directory: %v, want an error naming it", err)
	}
	if _, err := s.Create(ctx, st.Node("junk"), []byte("junk"), zkclient.Persistent, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Advance(ctx, "junk", 1); err == nil || !strings.Contains(err.Error(), `"junk"`) {
		t.Fatalf("Advance over a node holding junk: %v, want an error naming it", err)
	}

	// A lower token than the highest this replica knows is refused with no
	// request: the closed client would fail one.
	c, err := zkclient.Connect(ctx, zkAddrs(t))
	if err != nil {
		t.Fatal(err)
	}
	cached := fencing.NewZooKeeperStore(c, dir, nil)
	if h, err := cached.Advance(ctx, "/accounts/7", 9); err != nil || h != 9 {
		t.Fatalf("Advance(9): %d, %v", h, err)
	}
	c.Close()
	if h, err := cached.Advance(ctx, "/accounts/7", 8); err != nil || h != 9 {
		t.Fatalf("Advance(8) below the cached 9 with the client closed: %d, %v; want 9, no error", h, err)
	}
	if _, err := cached.Advance(ctx, "/accounts/7", 9); err == nil {
		t.Fatal("Advance(9), equal to the cached 9, with the client closed: no error; want the check it must make to fail")
	}
}
