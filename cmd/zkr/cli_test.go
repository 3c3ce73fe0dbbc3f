package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// cliReferenceFile is the command reference, generated from the command
// tree by TestCLIReference.
const cliReferenceFile = "../../docs/cli.md"

var update = flag.Bool("update", false, "rewrite docs/cli.md from the command tree (TestCLIReference)")

// TestCLIReference holds docs/cli.md to the command tree: the file is every
// command's --help, in tree order, and nothing else. When a command, flag or
// help text changes, rewrite it with
//
//	go test -run TestCLIReference -update .
func TestCLIReference(t *testing.T) {
	want := cliReference(t)
	if *update {
		if err := os.WriteFile(cliReferenceFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(cliReferenceFile)
	if err != nil {
		t.Fatalf("%v (write it with: go test -run TestCLIReference -update .)", err)
	}
	if string(got) != want {
		t.Errorf("docs/cli.md is stale (%s); rewrite it with: go test -run TestCLIReference -update .", firstDifference(string(got), want))
	}
}

// cliReference renders docs/cli.md: each command's help, exactly as
// "zkr ... --help" prints it.
func cliReference(t *testing.T) string {
	t.Helper()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub, append(path[:len(path):len(path)], sub.Name()))
			}
		}
	}
	walk((&app{getenv: func(string) string { return "" }}).newRootCmd(), nil)

	var b strings.Builder
	b.WriteString(`# zkr command reference

<!-- Generated from zkr's command tree by TestCLIReference (cmd/zkr/cli_test.go); do not edit.
     After changing a command, rewrite it: cd cmd/zkr && go test -run TestCLIReference -update . -->

Each section is what ` + "`zkr ... --help`" + ` prints.

`)
	for _, p := range paths {
		name := strings.Join(append([]string{"zkr"}, p...), " ")
		fmt.Fprintf(&b, "- [%s](#%s)\n", name, strings.ReplaceAll(name, " ", "-"))
	}
	for _, p := range paths {
		var out, errs bytes.Buffer
		a := &app{stdout: &out, stderr: &errs, getenv: func(string) string { return "" }}
		if code := a.run(context.Background(), append(p, "--help")); code != exitOK || errs.Len() > 0 {
			t.Fatalf("zkr %s --help: exit status %d, stderr %q", strings.Join(p, " "), code, errs.String())
		}
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s```\n", strings.Join(append([]string{"zkr"}, p...), " "), out.String())
	}
	return b.String()
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, the command tree gives %q", i+1, gl, wl)
		}
	}
	return "no line differs"
}

// words is s with its whitespace and Markdown code quotes folded: one
// space between words.
func words(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " ")
}

// exitStatusMention is a statement of an exit status in prose: "exit
// status 5 (lock, leadership or membership lost)". The words in brackets
// must begin the code's meaning in exitCodes.
var exitStatusMention = regexp.MustCompile(`exit status (\d+) \(([^)]*)\)`)

// TestExitCodesDocumented holds the documentation to exitCodes, the one
// source of zkr's exit codes: docs/cli.md (the root help, generated) says
// each code's meaning, and where README.md or the package documentation
// name an exit status with its meaning, "exit status N (meaning...)", the
// words are those of code N. Neither keeps a copy of the table.
func TestExitCodesDocumented(t *testing.T) {
	cli, err := os.ReadFile(cliReferenceFile)
	if err != nil {
		t.Fatal(err)
	}
	_, root, _ := strings.Cut(string(cli), "\nExit status:")
	root, _, _ = strings.Cut(root, "```")
	text := " " + words(root) + " "
	meanings := map[string]string{}
	for _, e := range exitCodes {
		meanings[exitCodeName(e.code)] = words(e.meaning)
		row := exitCodeName(e.code) + " " + words(e.meaning)
		if !strings.Contains(text, " "+row+" ") {
			t.Errorf("docs/cli.md's exit status table does not say %q", row)
		}
	}

	for _, name := range []string{"../../README.md", "doc.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		doc := words(strings.ReplaceAll(string(b), "\n//", "\n"))
		mentions := exitStatusMention.FindAllStringSubmatch(doc, -1)
		for _, m := range mentions {
			meaning, ok := meanings[m[1]]
			if !ok {
				t.Errorf("%s: %q: zkr has no exit status %s", name, m[0], m[1])
				continue
			}
			if !strings.HasPrefix(meaning, strings.TrimSpace(m[2])) {
				t.Errorf("%s: %q: exit status %s means %q", name, m[0], m[1], meaning)
			}
		}
		copies := 0
		for _, e := range exitCodes {
			if len(strings.Fields(e.meaning)) >= 4 && strings.Contains(doc, words(e.meaning)) {
				copies++
			}
		}
		if copies > 1 {
			t.Errorf("%s repeats %d rows of the exit status table: link docs/cli.md instead", name, copies)
		}
	}
}
