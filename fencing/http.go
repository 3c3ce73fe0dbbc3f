package fencing

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

const (
	// Header carries a request's fencing token, in decimal.
	Header = "Fencing-Token"
	// HighestHeader carries, in a [Guard]'s 409 answer, the highest token
	// the server has accepted for the resource.
	HighestHeader = "Fencing-Token-Highest"
)

// Transport is an [http.RoundTripper] that sends a fencing token with every
// request, in the [Header] header: the token of the request's context
// ([WithToken]) if it has one, else Source's. A request with no token (0:
// the lock is not held) is not sent: RoundTrip fails with an error
// wrapping [ErrNoToken]. Neither is one whose Source has a Lost channel
// (as the zkrecipes locks and Election do) that is closed: a holder that
// was told it lost its lock sends nothing, and the server refuses what a
// holder sends before it is told. Transport does not interpret the answer;
// see [CheckResponse].
type Transport struct {
	// Source gives the token of the current holding, e.g. a
	// *zkrecipes.Mutex. It may be nil if every request's context carries
	// its token.
	Source TokenSource
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip sends a copy of r with its token.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	token, ok := TokenFrom(r.Context())
	var err error
	if !ok && t.Source != nil {
		token = t.Source.Token()
		if l, ok := t.Source.(interface{ Lost() <-chan struct{} }); ok && token > 0 {
			select {
			case <-l.Lost():
				err = fmt.Errorf("%w for %s: the holding of token %d is lost", ErrNoToken, r.URL, token)
			default:
			}
		}
	}
	if err == nil {
		err = checkToken(r.URL.String(), token)
	}
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set(Header, strconv.FormatInt(token, 10))
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r2)
}

// CheckResponse returns what a [Guard] refused, as an error: a
// [*StaleError] for a 409 answer with [HighestHeader] (resource is the
// request's URL path), an error wrapping [ErrNoToken] for 428 Precondition
// Required. It returns nil for any other answer, and leaves the body to
// the caller.
func CheckResponse(resp *http.Response) error {
	resource, sent := "", ""
	if resp.Request != nil {
		resource, sent = resp.Request.URL.Path, resp.Request.Header.Get(Header)
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		h := resp.Header.Get(HighestHeader)
		if h == "" {
			return nil
		}
		highest, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return fmt.Errorf("fencing: %s %q in a 409 answer: %w", HighestHeader, h, err)
		}
		token, _ := strconv.ParseInt(sent, 10, 64)
		return &StaleError{Resource: resource, Token: token, Highest: highest}
	case http.StatusPreconditionRequired:
		return fmt.Errorf("%w: the server wants a %s header for %q", ErrNoToken, Header, resource)
	}
	return nil
}

// A Store keeps the highest token a [Guard] has seen for each resource.
// [MemoryStore] keeps it in the process; [Table.Store] in a SQL database
// and [ZooKeeperStore] in ZooKeeper, each shared by every server using it.
type Store interface {
	// Advance records token as the highest for resource unless a higher
	// one is recorded, atomically, and returns the highest after: token
	// itself when it was accepted.
	Advance(ctx context.Context, resource string, token int64) (highest int64, err error)
}

// MemoryStore is a [Store] in memory, for one server process. The zero
// value is empty and ready; it is safe for concurrent use. It keeps one
// entry per resource ever fenced.
type MemoryStore struct {
	mu      sync.Mutex
	highest map[string]int64
}

// Advance implements [Store].
func (s *MemoryStore) Advance(_ context.Context, resource string, token int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.highest == nil {
		s.highest = make(map[string]int64)
	}
	if h := s.highest[resource]; h > token {
		return h, nil
	}
	s.highest[resource] = token
	return token, nil
}

// Guard is an HTTP middleware that admits a request only if its fencing
// token ([Header]) is at least the highest the Store has seen for the
// request's resource, and records it. Its answers, with a text body naming
// the resource and the tokens:
//
//   - 428 Precondition Required: no token ([CheckResponse]: [ErrNoToken]);
//   - 400 Bad Request: a token that is not a positive decimal integer;
//   - 409 Conflict, with [HighestHeader]: a lower token, a newer holder has
//     written ([CheckResponse]: [*StaleError]); the sender should stop
//     acting as the holder, not retry;
//   - 503 Service Unavailable: the Store failed.
//
// An admitted request's context carries its token ([TokenFrom]).
//
// Guard orders admissions, not completions: a request admitted with token
// 5 whose handler is still running when one with token 7 is admitted may
// finish after it. A holder's successor comes at least a session timeout
// after the holder stopped being heard, so that takes a handler slower than
// the session timeout; where it can happen, fence the handler's own writes
// too, with the token of TokenFrom (for instance with [Table.Fence]).
type Guard struct {
	// Store keeps the highest tokens; it must not be nil. Wrap uses the
	// Store and Resource it finds: change them before Wrap, not after.
	Store Store
	// Resource names the resource a request writes to; nil means its URL
	// path. Requests for different resources are fenced independently.
	Resource func(*http.Request) string
}

// Wrap returns next behind the guard. It panics if g.Store is nil.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	if g.Store == nil {
		panic("fencing: Guard.Wrap: no Store")
	}
	store, name := g.Store, g.Resource
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := r.URL.Path
		if name != nil {
			resource = name(r)
		}
		h := r.Header.Get(Header)
		if h == "" {
			http.Error(w, fmt.Sprintf("fencing: %s needs a %s header", resource, Header), http.StatusPreconditionRequired)
			return
		}
		token, err := strconv.ParseInt(h, 10, 64)
		if err != nil || token <= 0 {
			http.Error(w, fmt.Sprintf("fencing: %s %q is not a positive integer", Header, h), http.StatusBadRequest)
			return
		}
		highest, err := store.Advance(r.Context(), resource, token)
		if err != nil {
			http.Error(w, fmt.Sprintf("fencing: %s: %v", resource, err), http.StatusServiceUnavailable)
			return
		}
		if highest > token {
			w.Header().Set(HighestHeader, strconv.FormatInt(highest, 10))
			http.Error(w, (&StaleError{Resource: resource, Token: token, Highest: highest}).Error(), http.StatusConflict)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithToken(r.Context(), token)))
	})
}
