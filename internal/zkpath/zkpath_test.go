package zkpath

import "testing"

func TestCheck(t *testing.T) {
	for _, p := range []string{"/", "/a", "/a/b.c", "/a/..b", "/é/日本"} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"", "a", "/a/", "/a//b", "/a/./b", "/a/..", "/nul\x00", "/tab\t", "/\u0085", "/\ue000", "/\ufff0", "/😀", "/\xff"} {
		if err := Check(p); err == nil {
			t.Errorf("Check(%q) = nil, want an error", p)
		}
	}
}

func TestJoinParent(t *testing.T) {
	for _, c := range []struct{ dir, name, joined string }{
		{"/", "a", "/a"},
		{"/a", "b", "/a/b"},
		{"/a/b", "c", "/a/b/c"},
	} {
		if got := Join(c.dir, c.name); got != c.joined {
			t.Errorf("Join(%q, %q) = %q, want %q", c.dir, c.name, got, c.joined)
		}
		if got := Parent(c.joined); got != c.dir {
			t.Errorf("Parent(%q) = %q, want %q", c.joined, got, c.dir)
		}
	}
	if got := Parent("/"); got != "/" {
		t.Errorf("Parent of the root = %q", got)
	}
}
