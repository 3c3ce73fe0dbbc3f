package zkrecipes

import (
	"context"
	"slices"
	"time"
)

// The test hooks of the root package, in one place: each reaches a point
// inside a recipe that a black-box test cannot.

// SetBeforeWatch installs f to run in m's Lock between listing the queue and
// setting the watch on the predecessor pred, so tests can make the
// predecessor disappear exactly in that gap.
func SetBeforeWatch(m *Mutex, f func(pred string)) { m.st.q.beforeWatch = f }

// SetAfterCheck installs f to run in m's TryAcquire between its read-only
// look at the semaphore and its first write, so tests can take the permits
// in that gap.
func SetAfterCheck(m *Semaphore, f func()) { m.afterCheck = f }

// SetNodeBeforeWatch installs f to run in n's keeper each time the node is
// made or taken over, before the watch on it is set, so tests can replace
// the node in that gap.
func SetNodeBeforeWatch(n *PersistentNode, f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.beforeWatch = f
}

// MultiLockMutex returns the Mutex that m holds path with, so tests can make
// one of its locks end on its own.
func MultiLockMutex(m *MultiLock, path string) *Mutex {
	return m.locks[slices.Index(m.paths, path)]
}

// RoundTrip sends one read on s and waits for its answer. The server sends a
// session's watch events before the answers to its later requests, and the
// session counts events as it reads them, so afterwards s.Stats() includes
// every event the server sent s before RoundTrip was called.
func RoundTrip(ctx context.Context, s *Session) error {
	_, err := s.read(ctx, "/", reading{op: readStat})
	return err
}

// CacheCounts returns how many times c read the whole tree (the initial
// load included) and how many node reads it left for the node's coming
// event because the node was younger than its parent's read.
func CacheCounts(c *Cache) (passes, deferred int64) { return c.passes.Load(), c.deferred.Load() }

// WithBeforeRead makes a Cache call f before it sends each read of a node
// (in a pass over the whole tree, and for watch events), on the cache's
// goroutine, so a test can change the tree at that very point.
func WithBeforeRead(f func(path string)) CacheOption {
	return func(c *cacheConfig) { c.beforeRead = f }
}

// WithBeforeList makes a Cache call f between sending the getData of a
// node and the listing of its children in a pass over the whole tree, on
// the cache's goroutine.
func WithBeforeList(f func(path string)) CacheOption {
	return func(c *cacheConfig) { c.beforeList = f }
}

// RemoveOwnLater deletes p in the background if it is s's ephemeral node,
// as a recipe does after a create whose answer was lost.
func RemoveOwnLater(s *Session, p string) { s.removeOwnLater(p) }

// WithProviderClock makes a Provider read the time from now, so tests can
// move its down policy's clock.
func WithProviderClock(now func() time.Time) ProviderOption {
	return func(c *providerConfig) { c.now = now }
}

// GrantRoutes returns how many lock paths s has a grant route on, and on
// how many it is setting one up or taking one down.
func GrantRoutes(s *Session) (live, busy int) {
	s.grMu.Lock()
	defer s.grMu.Unlock()
	return len(s.routes), len(s.warming) + len(s.retiring)
}
