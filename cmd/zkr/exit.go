package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// zkr's exit codes. exitCodes says what each means.
const (
	exitOK         = 0
	exitFailure    = 1
	exitUsage      = 2
	exitTimeout    = 3
	exitHeld       = 4
	exitLost       = 5
	exitConnect    = 6
	exitCannotExec = 126
	exitNotFound   = 127
	exitSignal     = 128 // + the signal's number
)

// exitCodes is zkr's exit status table: the one source of the table in
// "zkr --help" (exitCodesHelp). The package documentation and README.md
// say the same (TestExitCodesDocumented holds them to it). A meaning's
// lines are those of the help text.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "success"},
	{exitFailure, `internal or ZooKeeper error, including credentials refused by the
server or by a node's ACL (--auth, --sasl-user, --kerberos-principal,
--tls-cert) and a missing chroot; for diff: the subtrees differ`},
	{exitUsage, `bad input: unknown flag, bad path, bad duration, missing command,
unreadable or invalid TLS or Kerberos file`},
	{exitTimeout, "--timeout expired before the lock or leadership was obtained"},
	{exitHeld, "not obtained without waiting: lock held (--try), member id taken"},
	{exitLost, `lock, leadership or membership lost while the command ran; the command
was stopped (SIGTERM, then SIGKILL after --grace)`},
	{exitConnect, `could not connect to ZooKeeper, a failed TLS handshake included (or
start one, for demo and bench)`},
	{exitCannotExec, "the command could not be executed"},
	{exitNotFound, "the command was not found"},
	{exitSignal, "zkr was stopped by signal N before the command started"},
}

// exitCodeName is code as the table shows it: "128+N" for exitSignal.
func exitCodeName(code int) string {
	if code == exitSignal {
		return "128+N"
	}
	return strconv.Itoa(code)
}

// exitCodesHelp is the exit code table shown by "zkr --help".
var exitCodesHelp = func() string {
	var b strings.Builder
	b.WriteString(`Exit status:
  When zkr ran a command (lock, elect, join), it exits with the command's own
  status (128+N if the command was killed by signal N), except:`)
	for _, e := range exitCodes {
		name := exitCodeName(e.code)
		fmt.Fprintf(&b, "\n  %-*s%s", max(5, len(name)+2), name, strings.ReplaceAll(e.meaning, "\n", "\n       "))
	}
	return b.String()
}()

// exitError is an error that decides zkr's exit status. An exitError
// without err ends zkr silently with code (the command's own status).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode gives err the exit status code.
func withCode(code int, err error) error {
	return &exitError{code: code, err: err}
}

// codef formats an error with the exit status code.
func codef(code int, format string, args ...any) error {
	return withCode(code, fmt.Errorf(format, args...))
}

// usagef formats a bad-input error (exit status 2).
func usagef(format string, args ...any) error {
	return codef(exitUsage, format, args...)
}

// status ends zkr silently with code: the command's own status.
func status(code int) error {
	return &exitError{code: code}
}

// signalled is the error of zkr stopped by sig before its command started.
func signalled(sig os.Signal, what string) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return codef(exitFailure, "interrupted by %v while %s", sig, what)
	}
	return codef(exitSignal+int(s), "interrupted by %s while %s", signalName(s), what)
}

// signalName is the conventional name of s, such as "SIGTERM".
func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return s.String()
}

// report prints err, if any, as one line on w and returns the exit status.
// Errors that do not carry a status come from cobra's parsing of the command
// line: bad input.
func report(w io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	name := "zkr"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var e *exitError
	if !errors.As(err, &e) {
		fmt.Fprintf(w, "%s: %s (see %s --help)\n", name, oneLine(err.Error()), name)
		return exitUsage
	}
	switch {
	case e.err == nil:
	case e.code == exitUsage:
		fmt.Fprintf(w, "%s: %s (see %s --help)\n", name, oneLine(e.err.Error()), name)
	default:
		fmt.Fprintf(w, "%s: %s\n", name, oneLine(e.err.Error()))
	}
	return e.code
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
