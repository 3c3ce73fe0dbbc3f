package zkserver

import "github.com/zkrecipes/zkrecipes/internal/jute"

// watchMode is how a watch behaves once triggered.
type watchMode uint8

const (
	modeStandard  watchMode = iota // one-shot
	modePersist                    // stays; this path only
	modeRecursive                  // stays; this path and below, no child events
)

// watchTable maps a path to the connections watching it and their modes.
type watchTable map[string]map[*conn]watchMode

// watches holds the data watches (set by exists and getData) and the child
// watches (set by getChildren); persistent watches are in both tables, as
// in ZooKeeper.
type watches struct {
	data, child watchTable
	recursive   int // number of recursive entries in data

	// The connections that have set a data watch, for wchs and wchc:
	// ZooKeeper counts a connection from its first data watch until it
	// closes, also while none of its watches is left.
	watchers map[*conn]struct{}
}

func newWatches() *watches {
	return &watches{data: watchTable{}, child: watchTable{}, watchers: map[*conn]struct{}{}}
}

// add sets a watch of c on path in the data table (isData) or the child
// table. A later watch replaces the mode of an earlier one of the same
// connection on the same path, as ZooKeeper 3.8 does.
func (w *watches) add(isData bool, path string, c *conn, m watchMode) {
	t := w.table(isData)
	set := t[path]
	if set == nil {
		set = map[*conn]watchMode{}
		t[path] = set
	}
	if isData {
		w.watchers[c] = struct{}{}
		if old, had := set[c]; had && old == modeRecursive {
			w.recursive--
		}
		if m == modeRecursive {
			w.recursive++
		}
	}
	set[c] = m
}

// addPersistent sets a persistent (or persistent recursive) watch of c on
// path: in both tables, as in ZooKeeper.
func (w *watches) addPersistent(path string, c *conn, m watchMode) {
	w.add(true, path, c, m)
	w.add(false, path, c, m)
}

func (w *watches) table(isData bool) watchTable {
	if isData {
		return w.data
	}
	return w.child
}

// remove deletes c's watch on path from t and reports whether it had one.
func (w *watches) remove(isData bool, path string, c *conn) bool {
	t := w.table(isData)
	set := t[path]
	m, ok := set[c]
	if !ok {
		return false
	}
	if isData && m == modeRecursive {
		w.recursive--
	}
	delete(set, c)
	if len(set) == 0 {
		delete(t, path)
	}
	return true
}

// watched reports whether any connection watches path in t.
func (w *watches) watched(isData bool, path string) bool {
	return len(w.table(isData)[path]) > 0
}

// summary returns what wchs reports: ZooKeeper's data watches only, as
// the connections that have set one, the paths watched and the watches.
func (w *watches) summary() (conns, paths, total int) {
	for _, set := range w.data {
		total += len(set)
	}
	return len(w.watchers), len(w.data), total
}

// removeConn drops every watch of c.
func (w *watches) removeConn(c *conn) {
	delete(w.watchers, c)
	for path, set := range w.data {
		if m, ok := set[c]; ok {
			if m == modeRecursive {
				w.recursive--
			}
			delete(set, c)
			if len(set) == 0 {
				delete(w.data, path)
			}
		}
	}
	for path, set := range w.child {
		if _, ok := set[c]; ok {
			delete(set, c)
			if len(set) == 0 {
				delete(w.child, path)
			}
		}
	}
}

// trigger fires event typ on path in table t and returns the connections
// notified. Connections in skip are not notified again. One-shot watches
// on path are removed; recursive watches on path and its ancestors fire
// for every event but NodeChildrenChanged.
func (w *watches) trigger(isData bool, typ int32, path string, skip map[*conn]bool) map[*conn]bool {
	t := w.table(isData)
	hit := map[*conn]bool{}
	for p, exact := path, true; ; exact = false {
		set := t[p]
		for c, m := range set {
			switch {
			case m == modeRecursive:
				if typ != jute.EventNodeChildrenChanged {
					hit[c] = true
				}
			case exact:
				if !skip[c] {
					hit[c] = true
				}
				if m == modeStandard {
					delete(set, c)
				}
			}
		}
		if len(set) == 0 {
			delete(t, p)
		}
		if p == "/" || !isData || w.recursive == 0 {
			break
		}
		p, _ = parentOf(p)
	}
	for c := range skip {
		delete(hit, c)
	}
	return hit
}

// count returns the number of watches (path, connection, table).
func (w *watches) count() int {
	n := 0
	for _, set := range w.data {
		n += len(set)
	}
	for _, set := range w.child {
		n += len(set)
	}
	return n
}

// removeWatches removes c's watches of the given type on path, or, for
// checkWatches (remove false), looks for them, and reports whether there
// was one. checkWatches answers as ZooKeeper 3.8 does: whether any
// connection watches path in the table asked for (its
// WatchManager.containsWatcher does not compare the watchers with the
// asking connection); removeWatches removes only c's.
func (s *Server) removeWatches(c *conn, path string, typ int32, remove bool) bool {
	found := false
	for _, isData := range []bool{true, false} {
		if isData && typ == jute.WatcherChildren || !isData && typ == jute.WatcherData {
			continue
		}
		if !remove {
			found = found || s.watches.watched(isData, path)
			continue
		}
		if s.watches.remove(isData, path, c) {
			found = true
		}
	}
	return found
}

// setWatches restores a reconnecting client's watches, first firing the
// events it missed since relativeZxid.
func (s *Server) setWatches(c *conn, r *jute.Request) {
	for _, p := range r.DataWatches {
		s.restoreWatch(c, p, true, r.RelativeZxid)
	}
	for _, p := range r.ExistWatches {
		if s.tree.nodes[p] != nil {
			s.notify(c, jute.EventNodeCreated, p)
		} else {
			s.watches.add(true, p, c, modeStandard)
		}
	}
	for _, p := range r.ChildWatches {
		s.restoreWatch(c, p, false, r.RelativeZxid)
	}
	for _, p := range r.PersistWatches {
		s.watches.addPersistent(p, c, modePersist)
	}
	for _, p := range r.RecursiveWatches {
		s.watches.addPersistent(p, c, modeRecursive)
	}
}

// restoreWatch sets c's one-shot data (isData) or child watch on the node
// at p again, or, when the node is gone or its data (its children)
// changed after relativeZxid, sends the event the client missed instead.
func (s *Server) restoreWatch(c *conn, p string, isData bool, relativeZxid int64) {
	n := s.tree.nodes[p]
	if n == nil {
		s.notify(c, jute.EventNodeDeleted, p)
		return
	}
	changed, typ := n.stat.Mzxid, jute.EventNodeDataChanged
	if !isData {
		changed, typ = n.stat.Pzxid, jute.EventNodeChildrenChanged
	}
	if changed > relativeZxid {
		s.notify(c, typ, p)
		return
	}
	s.watches.add(isData, p, c, modeStandard)
}

// addWatch answers addWatch: a persistent, or persistent recursive, watch
// of c on the request's path.
func (s *Server) addWatch(c *conn, r *jute.Request) int32 {
	m := modePersist
	if r.Mode == jute.AddWatchPersistentRecursive {
		m = modeRecursive
	} else if r.Mode != jute.AddWatchPersistent {
		return jute.ErrBadArguments
	}
	s.watches.addPersistent(r.Path, c, m)
	return 0
}

// notify sends c a watch event and counts it.
func (s *Server) notify(c *conn, typ int32, path string) {
	c.notify(typ, path)
	s.counters.events++
}
