//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts the command in a process group of its own when ownGroup
// is set. (Only Linux can have the command killed when zkr dies.)
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
