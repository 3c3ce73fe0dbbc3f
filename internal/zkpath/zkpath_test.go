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
