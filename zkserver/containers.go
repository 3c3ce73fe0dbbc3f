package zkserver

import "time"

func timeNow() time.Time { return time.Now() }

// removeEmptyContainers deletes container nodes that had children and
// have none left, and TTL nodes without children whose TTL has passed
// since their last change, each in its own transaction, as ZooKeeper's
// container manager does. Called with s.mu held.
func (s *Server) removeEmptyContainers(now time.Time) {
	var doomed []string
	for p, n := range s.tree.nodes {
		if len(n.children) > 0 {
			continue
		}
		if n.isContainer() && n.stat.Cversion > 0 {
			doomed = append(doomed, p)
		} else if ttl := n.ttl(); ttl > 0 && now.UnixMilli()-n.stat.Mtime > ttl {
			doomed = append(doomed, p)
		}
	}
	for _, p := range doomed {
		x := s.begin()
		x.remove(p)
		s.commit(x)
	}
}
