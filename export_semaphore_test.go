package zkrecipes

// SetAfterCheck installs f to run in m's TryAcquire between its read-only
// look at the semaphore and its first write, so tests can take the permits
// in that gap.
func SetAfterCheck(m *Semaphore, f func()) { m.afterCheck = f }
