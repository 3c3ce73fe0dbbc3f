package zkrecipes

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
