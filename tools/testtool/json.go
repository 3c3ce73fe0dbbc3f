package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// event is one line of `go test -json` (see `go doc test2json`), with the
// build events that go test -json reports since Go 1.24.
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string // a package's fail: its build failed
}

// top returns the top-level test of a test or subtest name.
func top(test string) string {
	name, _, _ := strings.Cut(test, "/")
	return name
}

// readEvents calls f for each event read from r. A line that is not JSON
// (go's own messages when its stderr is merged) comes as an event with
// Action "text".
func readEvents(r io.Reader, f func(event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			f(event{Action: "text", Output: string(line) + "\n"})
			continue
		}
		f(e)
	}
	return sc.Err()
}

// printQuiet writes what non-verbose go test would: the output of the
// tests that failed (with their subtests'), every package-level line
// (ok, FAIL, panics, build errors), and, when a package ends while some
// of its tests have not (a timeout, a crash), those tests' output so far.
// The framing lines of -json's implied -v (=== RUN and the like, and
// the passing tests' --- PASS) are left out.
func printQuiet(r io.Reader, w io.Writer) error {
	type key struct{ pkg, test string }
	bufs := map[key]*strings.Builder{}
	var order []key
	flushUnfinished := func(pkg string) {
		for _, k := range order {
			if b, ok := bufs[k]; ok && k.pkg == pkg {
				fmt.Fprintf(w, "--- UNFINISHED: %s (its output so far)\n%s", k.test, b.String())
				delete(bufs, k)
			}
		}
		order = slices.DeleteFunc(order, func(k key) bool { _, ok := bufs[k]; return !ok })
	}
	err := readEvents(r, func(e event) {
		switch {
		case e.Action == "text" || e.Action == "build-output":
			io.WriteString(w, e.Output)
		case e.Test != "":
			k := key{e.Package, top(e.Test)}
			switch e.Action {
			case "output":
				if strings.HasPrefix(e.Output, "=== ") {
					return
				}
				b, ok := bufs[k]
				if !ok {
					b = new(strings.Builder)
					bufs[k] = b
					order = append(order, k)
				}
				b.WriteString(e.Output)
			case "pass", "skip", "fail":
				if e.Test != k.test {
					return // a subtest: its output goes with its parent's
				}
				if b, ok := bufs[k]; ok && e.Action == "fail" {
					io.WriteString(w, b.String())
				}
				delete(bufs, k)
			}
		case e.Action == "output":
			if e.Output == "PASS\n" || strings.HasPrefix(e.Output, "=== ") {
				return
			}
			if strings.HasPrefix(e.Output, "FAIL\t") || strings.HasPrefix(e.Output, "ok  \t") {
				flushUnfinished(e.Package)
			}
			io.WriteString(w, e.Output)
		case e.Action == "fail":
			flushUnfinished(e.Package)
		}
	})
	if f, ok := w.(interface{ Sync() error }); ok {
		f.Sync()
	}
	return err
}

// printAll writes every line of output, as go test -v would.
func printAll(r io.Reader, w io.Writer) error {
	return readEvents(r, func(e event) {
		if e.Action == "output" || e.Action == "text" || e.Action == "build-output" {
			io.WriteString(w, e.Output)
		}
	})
}

// result counts one test's outcomes.
type result struct {
	label, pkg, test       string
	runs, pass, fail, skip int
}

// failed returns the failed runs, those that never ended counted in.
func (r *result) failed() int {
	return r.fail + max(0, r.runs-r.pass-r.fail-r.skip)
}

// tally reads go test -json files, each optionally named LABEL=FILE, and
// writes per label and top-level test the runs and failures. Its exit
// code is 1 when any run failed or any package failed outside its tests
// (a build error, TestMain, a timeout).
func tally(w io.Writer, args []string) (int, error) {
	if len(args) == 0 {
		return 2, fmt.Errorf("no files")
	}
	var all []*result
	var pkgFails []string
	for _, arg := range args {
		label, file, ok := strings.Cut(arg, "=")
		if !ok {
			label, file = "", arg
		}
		f, err := os.Open(file)
		if err != nil {
			return 2, err
		}
		byKey := map[[2]string]*result{}
		failedPkg := map[string]int{}
		testFailedIn := map[string]bool{}
		err = readEvents(f, func(e event) {
			switch {
			case e.Action == "build-fail":
				pkgFails = append(pkgFails, fmt.Sprintf("%s: %s: build failed", label, e.ImportPath))
			case e.Test == "" && e.Action == "fail" && e.FailedBuild == "":
				failedPkg[e.Package]++
			case e.Test != "" && e.Test == top(e.Test):
				k := [2]string{e.Package, e.Test}
				r := byKey[k]
				if r == nil {
					r = &result{label: label, pkg: e.Package, test: e.Test}
					byKey[k] = r
				}
				switch e.Action {
				case "run":
					r.runs++
				case "pass":
					r.pass++
				case "fail":
					r.fail++
					testFailedIn[e.Package] = true
				case "skip":
					r.skip++
				}
			}
		})
		f.Close()
		if err != nil {
			return 2, fmt.Errorf("%s: %w", file, err)
		}
		var these []*result
		for _, r := range byKey {
			if r.failed() > r.fail {
				testFailedIn[r.pkg] = true
			}
			these = append(these, r)
		}
		slices.SortFunc(these, func(a, b *result) int {
			return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.test, b.test))
		})
		all = append(all, these...)
		for pkg, n := range failedPkg {
			if !testFailedIn[pkg] {
				pkgFails = append(pkgFails, fmt.Sprintf("%s: %s: failed %d time(s) outside any test (TestMain, leak check, build, crash)", label, pkg, n))
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " runs\tfailed\tskipped\tcondition\tpackage\ttest")
	runs, failedRuns := 0, 0
	for _, r := range all {
		mark := " "
		if r.failed() > 0 {
			mark = "!"
			failedRuns += r.failed()
		}
		runs += r.runs
		fmt.Fprintf(tw, "%5d\t%5d %s\t%7d\t%s\t%s\t%s\n", r.runs, r.failed(), mark, r.skip, r.label, r.pkg, r.test)
	}
	tw.Flush()
	for _, s := range pkgFails {
		fmt.Fprintln(w, "package failure:", s)
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no test ran")
		return 1, nil
	}
	if failedRuns > 0 || len(pkgFails) > 0 {
		fmt.Fprintf(w, "FAIL: %d of %d runs failed; %d package failure(s)\n", failedRuns, runs, len(pkgFails))
		return 1, nil
	}
	fmt.Fprintf(w, "PASS: all %d runs passed\n", runs)
	return 0, nil
}

// slowest writes the n slowest top-level test runs of go test -json files,
// each optionally named LABEL=FILE.
func slowest(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("slowest", flag.ContinueOnError)
	n := fs.Int("n", 20, "how many tests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	type run struct {
		event
		label string
	}
	var all []*run
	for _, arg := range fs.Args() {
		label, file, ok := strings.Cut(arg, "=")
		if !ok {
			label, file = "", arg
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		err = readEvents(f, func(e event) {
			if e.Test != "" && e.Test == top(e.Test) && (e.Action == "pass" || e.Action == "fail") {
				all = append(all, &run{e, label})
			}
		})
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	slices.SortStableFunc(all, func(a, b *run) int {
		switch {
		case a.Elapsed > b.Elapsed:
			return -1
		case a.Elapsed < b.Elapsed:
			return 1
		}
		return 0
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range all[:min(*n, len(all))] {
		fmt.Fprintf(tw, "%8.2fs\t%s\t%s\t%s\t%s\n", e.Elapsed, e.Action, e.label, e.Package, e.Test)
	}
	return tw.Flush()
}
