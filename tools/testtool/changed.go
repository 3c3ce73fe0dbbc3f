package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// changed writes, one a line as "DIR TestName", the Test functions of
// *_test.go files whose lines changed between BASE and the work tree
// (staged or not), and every Test function of untracked test files. DIR is
// relative to the current directory, starting with "./". A changed file
// whose changes touch no Test function (a helper) is reported on stderr.
func changed(w io.Writer, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: testtool changed BASE")
	}
	base := args[0]
	topDir, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	topDir = strings.TrimSpace(topDir)
	diff, err := git("-C", topDir, "diff", "-U0", "--no-color", "--no-ext-diff", base, "--", "*_test.go")
	if err != nil {
		return err
	}
	touched := changedLines(diff) // file (relative to topDir) -> lines; nil: the whole file
	untracked, err := git("-C", topDir, "ls-files", "--others", "--exclude-standard", "--", "*_test.go")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(untracked) {
		touched[f] = nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	for file, lines := range touched {
		abs := filepath.Join(topDir, file)
		names, err := testsAt(abs, lines)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(cwd, filepath.Dir(abs))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(dir, ".") {
			dir = "./" + dir
		}
		if len(names) == 0 {
			fmt.Fprintf(os.Stderr, "testtool changed: %s: no Test function changed (a helper?): name the tests that use it with -run\n", file)
		}
		for _, n := range names {
			fmt.Fprintln(w, filepath.ToSlash(dir), n)
		}
	}
	return nil
}

func git(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

var hunkRE = regexp.MustCompile(`^@@ -\S+ \+(\d+)(?:,(\d+))? @@`)

// changedLines reads a -U0 diff and returns, per file on the new side,
// the lines that were added or changed, and for a deletion the lines
// around it. Deleted files are left out.
func changedLines(diff string) map[string]map[int]bool {
	files := map[string]map[int]bool{}
	var cur map[int]bool
	sc := bufio.NewScanner(strings.NewReader(diff))
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "+++ "); ok {
			cur = nil
			if name != "/dev/null" {
				cur = map[int]bool{}
				files[strings.TrimPrefix(name, "b/")] = cur
			}
			continue
		}
		m := hunkRE.FindStringSubmatch(line)
		if m == nil || cur == nil {
			continue
		}
		start, _ := strconv.Atoi(m[1])
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		if n == 0 { // lines deleted after line start
			cur[start], cur[start+1] = true, true
		}
		for l := start; l < start+n; l++ {
			cur[l] = true
		}
	}
	return files
}

// testsAt returns the Test functions of a Go file that contain one of
// lines (with their doc comments), or all of them if lines is nil.
func testsAt(file string, lines map[int]bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || !isTestName(fd.Name.Name) {
			continue
		}
		from := fd.Pos()
		if fd.Doc != nil {
			from = fd.Doc.Pos()
		}
		hit := lines == nil
		for l := fset.Position(from).Line; !hit && l <= fset.Position(fd.End()).Line; l++ {
			hit = lines[l]
		}
		if hit {
			names = append(names, fd.Name.Name)
		}
	}
	return names, nil
}

// isTestName reports whether name is that of a test function go test
// runs: Test, or Test followed by a character that is not a lower-case
// letter; TestMain is not one.
func isTestName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	if !ok || name == "TestMain" {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}
