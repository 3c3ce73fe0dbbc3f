package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	lib := func(v string, r *debug.Module) *debug.Module {
		return &debug.Module{Path: libraryPath, Version: v, Replace: r}
	}
	for _, c := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install @v0.1.0", debug.BuildInfo{
			GoVersion: "go1.24.0",
			Main:      debug.Module{Path: "github.com/zkrecipes/zkrecipes/cmd/zkr", Version: "v0.1.0"},
			Deps:      []*debug.Module{{Path: "github.com/spf13/cobra", Version: "v1.10.2"}, lib("v0.1.0", nil)},
		}, "zkr v0.1.0\nlibrary github.com/zkrecipes/zkrecipes v0.1.0\nrevision unknown (the build recorded none)\nbuilt with go1.24.0\n"},
		{"checkout with VCS", debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/zkrecipes/zkrecipes/cmd/zkr", Version: "(devel)"},
			Deps:      []*debug.Module{lib("(devel)", nil)},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "60452c09"},
				{Key: "vcs.time", Value: "2026-12-02T06:27:34Z"}, {Key: "vcs.modified", Value: "true"}},
		}, "zkr (devel)\nlibrary github.com/zkrecipes/zkrecipes (devel)\nrevision 60452c09 (2026-12-02T06:27:34Z) modified\nbuilt with go1.26.8\n"},
		{"replaced library, no version", debug.BuildInfo{
			GoVersion: "go1.26.8",
			Deps:      []*debug.Module{lib("v0.1.0", &debug.Module{Path: "../.."})},
		}, "zkr (devel)\nlibrary github.com/zkrecipes/zkrecipes (devel) (replaced by ../..)\nrevision unknown (the build recorded none)\nbuilt with go1.26.8\n"},
	} {
		if got := describeBuild(&c.info); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestVersion builds zkr asking for VCS stamping and checks that zkr
// version and zkr --version say the same, and that a revision they name
// is the checkout's. (Go stamps none in a linked git worktree: then they
// must say so.)
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "zkr")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	run := func(arg string) string {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("zkr %s: %v", arg, err)
		}
		return string(out)
	}
	v := run("version")
	if flag := run("--version"); flag != v {
		t.Errorf("zkr --version says\n%s\nzkr version says\n%s", flag, v)
	}
	if !strings.HasPrefix(v, "zkr ") || !strings.Contains(v, "\nlibrary "+libraryPath+" ") || !strings.Contains(v, "\nbuilt with go") {
		t.Errorf("zkr version:\n%s", v)
	}
	_, rest, stamped := strings.Cut(v, "\nrevision ")
	rev, _, _ := strings.Cut(rest, " ")
	rev, _, _ = strings.Cut(rev, "\n")
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	switch {
	case !stamped:
		t.Errorf("no revision line:\n%s", v)
	case rev == "unknown":
		t.Logf("the build recorded no revision (a linked git worktree, or no git):\n%s", v)
	case err != nil:
		t.Errorf("zkr names revision %s, but git rev-parse HEAD fails: %v", rev, err)
	case rev != strings.TrimSpace(string(head)):
		t.Errorf("zkr names revision %s, the checkout is at %s", rev, head)
	}
}
