package zkrecipes

// SetBeforeWatch installs f to run in m's Lock between listing the queue and
// setting the watch on the predecessor pred, so tests can make the
// predecessor disappear exactly in that gap.
func SetBeforeWatch(m *Mutex, f func(pred string)) { m.st.q.beforeWatch = f }
