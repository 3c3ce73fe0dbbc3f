package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/fencing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// failingStore is a Store whose database is down.
type failingStore struct{}

func (failingStore) Advance(context.Context, string, int64) (int64, error) {
	return 0, errors.New("database down")
}

// TestGuard: every answer of the Guard, on a real server: admitted
// requests reach the handler with their token; a lower token gets 409 and
// the highest token, which CheckResponse makes a StaleError; no token 428;
// a bad token 400; a failing store 503; resources are fenced apart.
func TestGuard(t *testing.T) {
	var got []int64
	var mu sync.Mutex
	h := (&fencing.Guard{Store: &fencing.MemoryStore{}}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fencing.TokenFrom(r.Context())
		if !ok {
			t.Error("an admitted request's context carries no token")
		}
		mu.Lock()
		got = append(got, tok)
		mu.Unlock()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	down := httptest.NewServer((&fencing.Guard{Store: failingStore{}}).Wrap(http.NotFoundHandler()))
	defer down.Close()

	send := func(url, token string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set(fencing.Header, token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, tc := range []struct {
		url, token string
		status     int
		highest    string
		err        error
	}{
		{"/a", "5", http.StatusOK, "", nil},
		{"/a", "5", http.StatusOK, "", nil}, // the same holder again
		{"/a", "7", http.StatusOK, "", nil},
		{"/a", "6", http.StatusConflict, "7", fencing.ErrStale},
		{"/b", "6", http.StatusOK, "", nil}, // another resource
		{"/a", "", http.StatusPreconditionRequired, "", fencing.ErrNoToken},
		{"/a", "x", http.StatusBadRequest, "", nil},
		{"/a", "0", http.StatusBadRequest, "", nil},
		{"/a", "-8", http.StatusBadRequest, "", nil},
		{"/a", "99999999999999999999", http.StatusBadRequest, "", nil},
	} {
		resp, body := send(srv.URL+tc.url, tc.token)
		err := fencing.CheckResponse(resp)
		if resp.StatusCode != tc.status || resp.Header.Get(fencing.HighestHeader) != tc.highest || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s with token %q: %s %q (highest %q), CheckResponse %v; want %d, highest %q, %v",
				tc.url, tc.token, resp.Status, body, resp.Header.Get(fencing.HighestHeader), err, tc.status, tc.highest, tc.err)
		}
		if tc.status >= 400 && !strings.HasPrefix(body, "fencing: ") {
			t.Errorf("%s with token %q: body %q does not say what was wrong", tc.url, tc.token, body)
		}
	}
	resp, body := send(down.URL+"/a", "5")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "database down") {
		t.Errorf("failing store: %s %q, want 503 naming the store's error", resp.Status, body)
	}
	if want := []int64{5, 5, 7, 6}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the handler saw tokens %v, want %v", got, want)
	}
	var stale *fencing.StaleError
	resp, _ = send(srv.URL+"/a", "6")
	if err := fencing.CheckResponse(resp); !errors.As(err, &stale) || *stale != (fencing.StaleError{Resource: "/a", Token: 6, Highest: 7}) {
		t.Errorf("CheckResponse of a refused token 6: %#v, want StaleError{/a 6 7}", err)
	}
}

// holding is a TokenSource with a Lost channel, as a lock is.
type holding struct {
	token int64
	lost  chan struct{}
}

func (h *holding) Token() int64          { return h.token }
func (h *holding) Lost() <-chan struct{} { return h.lost }

// TestTransport: the Transport sends its Source's token, or the context's;
// it leaves the caller's request untouched; without a token, or with a
// lost holding, it sends nothing, closes the body and says why.
func TestTransport(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get(fencing.Header))
	}))
	defer srv.Close()
	h := &holding{token: 42, lost: make(chan struct{})}
	client := &http.Client{Transport: &fencing.Transport{Source: h, Base: srv.Client().Transport}}

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	do := func(req *http.Request) error {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get(fencing.Header) != "" {
		t.Error("the Transport changed the caller's request")
	}
	if err := do(req.WithContext(fencing.WithToken(context.Background(), 7))); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != "[42 7]" {
		t.Errorf("the server saw tokens %v, want [42 7]", seen)
	}

	body := &closeRecorder{Reader: strings.NewReader("x")}
	close(h.lost)
	post, _ := http.NewRequest(http.MethodPost, srv.URL, body)
	if err := do(post); !errors.Is(err, fencing.ErrNoToken) || !strings.Contains(err.Error(), "lost") {
		t.Errorf("request with a lost holding: %v, want ErrNoToken saying it is lost", err)
	}
	h.token = 0
	if err := do(req); !errors.Is(err, fencing.ErrNoToken) {
		t.Errorf("request with token 0: %v, want ErrNoToken", err)
	}
	if !body.closed {
		t.Error("the refused request's body was not closed")
	}
	if len(seen) != 2 {
		t.Errorf("the server saw %d requests, want the 2 with a token", len(seen))
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestMemoryStore: concurrent advances end on the highest token, and each
// one is told either that it was accepted or a higher token.
func TestMemoryStore(t *testing.T) {
	var s fencing.MemoryStore
	var wg sync.WaitGroup
	for i := int64(1); i <= 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := s.Advance(context.Background(), "r", i)
			if err != nil || h < i {
				t.Errorf("Advance(%d) = %d, %v", i, h, err)
			}
		}()
	}
	wg.Wait()
	if h, _ := s.Advance(context.Background(), "r", 1); h != 50 {
		t.Errorf("highest after 1..50: %d, want 50", h)
	}
}

// TestNewTable: a table name that is not an identifier, and a missing
// dialect, are refused; the statements use the dialect's placeholders.
func TestNewTable(t *testing.T) {
	for _, name := range []string{"", "fence; DROP TABLE x", "1fence", "a.b.c", `"fence"`, "fence-1"} {
		if _, err := fencing.NewTable(fencing.PostgreSQL, name); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("NewTable(%q): %v, want an error naming it", name, err)
		}
	}
	if _, err := fencing.NewTable(fencing.Dialect{}, "fence"); err == nil {
		t.Error("NewTable with no dialect: no error")
	}
	for _, name := range []string{"fence", "app.fence", "_f1"} {
		tb, err := fencing.NewTable(fencing.SQLite, name)
		if err != nil || tb.Name() != name {
			t.Errorf("NewTable(%q): %v", name, err)
		}
	}
	if p, s := fencing.PostgreSQL.Param(2), fencing.SQLite.Param(2); p != "$2" || s != "?2" {
		t.Errorf("Param(2): %q and %q, want $2 and ?2", p, s)
	}
	tb, _ := fencing.NewTable(fencing.PostgreSQL, "fence")
	if want := "CREATE TABLE IF NOT EXISTS fence (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)"; tb.DDL() != want {
		t.Errorf("DDL: %q, want %q", tb.DDL(), want)
	}
}
