package zktest

import "syscall"

// sysProcAttr puts a member in its own process group and has the kernel
// kill it if the test binary dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
