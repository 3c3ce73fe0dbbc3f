// Command testtool is what the project's test scripts (scripts/test.sh,
// scripts/flakegate.sh) use to read `go test -json` output, to find the
// tests a change touches and to freeze parts of a test's process tree.
//
// Usage:
//
//	go test -json ... | testtool print [-v]   # go test's own text: failures and package lines (-v: all)
//	testtool tally [LABEL=]FILE...            # per test: runs, failures; exit 1 if any failed
//	testtool slowest [-n 20] [LABEL=]FILE...  # the slowest top-level tests
//	testtool changed BASE                     # Test functions changed since BASE: "dir TestName" lines
//	testtool stall [-setting mild|harsh|off] [-log FILE] [-timeout D] CMD...  # CMD while freezing parts of its tree
//
// It is built from the tools module (GOWORK=off go -C tools build ./testtool)
// and uses the standard library only.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  testtool print [-v] < go-test-json
  testtool tally [LABEL=]FILE...
  testtool slowest [-n N] [LABEL=]FILE...
  testtool changed BASE
  testtool stall [-setting mild|harsh|off] [-log FILE] [-timeout D] CMD [ARG...]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var code int
	var err error
	switch cmd {
	case "print":
		if len(args) == 1 && args[0] == "-v" {
			err = printAll(os.Stdin, os.Stdout)
		} else {
			err = printQuiet(os.Stdin, os.Stdout)
		}
	case "tally":
		code, err = tally(os.Stdout, args)
	case "slowest":
		err = slowest(os.Stdout, args)
	case "changed":
		err = changed(os.Stdout, args)
	case "stall":
		code, err = stall(args)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtool %s: %v\n", cmd, err)
		os.Exit(2)
	}
	os.Exit(code)
}
