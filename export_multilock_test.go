package zkrecipes

import "slices"

// MultiLockMutex returns the Mutex that m holds path with, so tests can make
// one of its locks end on its own.
func MultiLockMutex(m *MultiLock, path string) *Mutex {
	return m.locks[slices.Index(m.paths, path)]
}
