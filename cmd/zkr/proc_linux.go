package main

import "syscall"

// sysProcAttr puts the command in a process group of its own when ownGroup
// is set, and has the kernel kill it if zkr dies: zkr's session, and with
// it the lock, outlives zkr only until the server expires it, and the
// command must not run on past that.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}
