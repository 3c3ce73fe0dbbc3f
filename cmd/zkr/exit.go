package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// zkr's exit codes; see the package documentation and exitCodesHelp.
const (
	exitOK         = 0
	exitFailure    = 1   // internal or ZooKeeper error, refused credentials included
	exitUsage      = 2   // bad input
	exitTimeout    = 3   // --timeout expired while waiting
	exitHeld       = 4   // not obtained without waiting
	exitLost       = 5   // lost while the command ran
	exitConnect    = 6   // no ZooKeeper to talk to (a failed TLS handshake included)
	exitCannotExec = 126 // the command could not be executed
	exitNotFound   = 127 // the command was not found
	exitSignal     = 128 // + the signal's number
)

// exitCodesHelp is the exit code table shown by "zkr --help".
const exitCodesHelp = `Exit status:
  When zkr ran a command (lock, elect, join), it exits with the command's own
  status (128+N if the command was killed by signal N), except:
  0    success
  1    internal or ZooKeeper error, including credentials refused by the
       server or by a node's ACL (--auth, --sasl-user, --kerberos-principal,
       --tls-cert) and a missing chroot
  2    bad input: unknown flag, bad path, bad duration, missing command,
       unreadable or invalid TLS or Kerberos file
  3    --timeout expired before the lock or leadership was obtained
  4    not obtained without waiting: lock held (--try), member id taken
  5    lock, leadership or membership lost while the command ran; the command
       was stopped (SIGTERM, then SIGKILL after --grace)
  6    could not connect to ZooKeeper, a failed TLS handshake included (or
       start one, for demo and bench)
  126  the command could not be executed
  127  the command was not found
  128+N  zkr was stopped by signal N before the command started`

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
