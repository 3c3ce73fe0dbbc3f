package zkserver

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
)

// treeDump returns every node with its data (null apart from empty),
// ACL, stat and sequence counter.
func treeDump(s *Server) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for p, n := range s.tree.nodes {
		data := "null"
		if n.data != nil {
			data = fmt.Sprintf("%q", n.data)
		}
		out[p] = fmt.Sprintf("%s %v %+v seq=%d children=%v", data, n.acl, n.stat, n.seq, n.sortedChildren())
	}
	return out
}

// TestFuzzySnapshot takes a snapshot while the tree changes between its
// chunks (nodes deleted before the snapshot reaches them, parents and
// children created and deleted behind it, data changed on both sides)
// and checks that the snapshot plus the log after it load as the tree
// the server had.
func TestFuzzySnapshot(t *testing.T) {
	defer func(n int) { snapChunk = n }(snapChunk)
	snapChunk = 3
	dir := t.TempDir()
	s := NewServer(Options{DataDir: dir, SnapshotCount: 1 << 30})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/a", "/a/1", "/a/2", "/b", "/b/1", "/c", "/d", "/e", "/f", "/g", "/z"} {
		must(s.Create(p, []byte("v0:"+p)))
	}
	must(s.Set("/d", nil))
	chunk := 0
	s.snapHook = func() {
		chunk++
		switch chunk {
		case 1: // the snapshot has read / and /a, /a/1
			must(s.Delete("/a/1"))
			must(s.Create("/a/3", nil))
			must(s.Set("/a", []byte("after")))
			must(s.Delete("/z")) // before the snapshot reaches it
			must(s.Create("/y", []byte("new")))
			must(s.Create("/y/child", []byte{}))
			must(s.Create("/e/x", nil)) // under a node the snapshot will miss
		case 2:
			must(s.Delete("/e/x"))
			must(s.Delete("/e"))   // gone when the snapshot reaches it
			must(s.Delete("/b/1")) // read already? either way
			must(s.Delete("/b"))
			must(s.Create("/b", []byte("again")))
			must(s.Create("/g/seq", nil))
			must(s.Delete("/g/seq"))
		case 3:
			must(s.Delete("/y/child"))
			must(s.Delete("/y"))
			must(s.Set("/f", []byte{}))
			must(s.Create("/a/2/deep", nil))
		}
	}
	s.mu.Lock()
	s.startSnapshot()
	zxid := s.zxid
	s.mu.Unlock()
	s.snapWG.Wait()
	s.snapHook = nil
	if chunk < 3 {
		t.Fatalf("the snapshot had %d chunks; the test needs more", chunk)
	}
	snaps, logs, err := dataFiles(dir)
	must(err)
	if want := filepath.Join(dir, fmt.Sprintf("snap.%016x", zxid)); !slices.Contains(snaps, want) || len(snaps) != 1 || len(logs) != 1 {
		t.Fatalf("files after the snapshot: %v %v, want only the snapshot at %x and its log", snaps, logs, zxid)
	}
	want := treeDump(s)
	s.Close()

	s2 := NewServer(Options{DataDir: dir})
	if err := s2.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := treeDump(s2)
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			t.Errorf("%s: loaded %s, want %s", p, got[p], want[p])
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: loaded, but the server had no such node: %s", p, got[p])
		}
	}
}
