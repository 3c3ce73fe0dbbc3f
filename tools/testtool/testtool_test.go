package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestChangedLines(t *testing.T) {
	diff := `diff --git a/x_test.go b/x_test.go
--- a/x_test.go
+++ b/x_test.go
@@ -3 +3 @@ package x
-old
+new
@@ -10,2 +9,0 @@ func TestB(t *testing.T) {
@@ -20,0 +19,3 @@ func TestC(t *testing.T) {
+a
+b
+c
diff --git a/gone_test.go b/gone_test.go
--- a/gone_test.go
+++ /dev/null
@@ -1,3 +0,0 @@
`
	got := changedLines(diff)
	want := []int{3, 9, 10, 19, 20, 21}
	var lines []int
	for l := range got["x_test.go"] {
		lines = append(lines, l)
	}
	slices.Sort(lines)
	if !slices.Equal(lines, want) {
		t.Errorf("x_test.go lines %v, want %v", lines, want)
	}
	if _, ok := got["gone_test.go"]; ok || len(got) != 1 {
		t.Errorf("files %v, want x_test.go only", got)
	}
}

func TestTestsAt(t *testing.T) {
	src := `package x

import "testing"

func helper() {}

// TestA has a doc comment.
func TestA(t *testing.T) {
	helper()
}

func TestMain(m *testing.M) {}

func Testify() {}

func TestB(t *testing.T) {}
`
	file := filepath.Join(t.TempDir(), "x_test.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lines []int
		want  []string
	}{
		{[]int{5}, nil},               // helper
		{[]int{7}, []string{"TestA"}}, // its doc comment
		{[]int{9, 16}, []string{"TestA", "TestB"}},
		{[]int{12, 14}, nil}, // TestMain, Testify
	} {
		lines := map[int]bool{}
		for _, l := range c.lines {
			lines[l] = true
		}
		got, err := testsAt(file, lines)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("lines %v: %v, want %v", c.lines, got, c.want)
		}
	}
	all, err := testsAt(file, nil)
	if err != nil || !slices.Equal(all, []string{"TestA", "TestB"}) {
		t.Errorf("whole file: %v, %v", all, err)
	}
}

// events is go test -json output: TestA passes then fails, TestB passes,
// TestC is running when the package times out.
const events = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.10s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:5: setup\n"}
{"Action":"run","Package":"p","Test":"TestA/ok"}
{"Action":"pass","Package":"p","Test":"TestA/ok","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:9: too slow\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":2}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (2.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":2}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:1: quiet\n"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":5}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:1: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1m0s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t60.0s\n"}
{"Action":"fail","Package":"p","Elapsed":60}
`

func TestPrintQuiet(t *testing.T) {
	var b strings.Builder
	if err := printQuiet(strings.NewReader(events), &b); err != nil {
		t.Fatal(err)
	}
	want := `    a_test.go:5: setup
    a_test.go:9: too slow
--- FAIL: TestA (2.00s)
panic: test timed out after 1m0s
--- UNFINISHED: TestC (its output so far)
    c_test.go:1: waiting
FAIL	p	60.0s
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTally(t *testing.T) {
	file := filepath.Join(t.TempDir(), "e.json")
	if err := os.WriteFile(file, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	code, err := tally(&b, []string{"stall=" + file})
	if err != nil || code != 1 {
		t.Fatalf("tally = %d, %v; want 1, nil", code, err)
	}
	for _, want := range []string{
		"    2      1 !        0  stall      p        TestA\n",
		"    1      0          0  stall      p        TestB\n",
		"    1      1 !        0  stall      p        TestC\n", // unfinished
		"FAIL: 2 of 4 runs failed; 0 package failure(s)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tally output lacks %q:\n%s", want, b.String())
		}
	}
}
