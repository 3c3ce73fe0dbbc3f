//go:build unix

package main

import (
	"os"
	"syscall"
)

// signalGroup sends sig to the process group pgid.
func signalGroup(pgid int, sig syscall.Signal) {
	syscall.Kill(-pgid, sig) // the group may be gone already: nothing to do
}

// exitStatus is the status a shell would report for the command: its exit
// code, or 128+N when signal N killed it.
func exitStatus(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return st.ExitCode()
}
