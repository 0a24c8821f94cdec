package fault

import "syscall"

// sysProcAttr puts the child in a process group of its own and kills it when the
// harness dies, so no engine outlives a crashed harness.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
