//go:build linux

package bench

import (
	"os/exec"
	"syscall"
)

// setChildProcAttr puts the broker process in a process group of its own and has the
// kernel kill it when this process dies, so a failed or interrupted run leaves no orphan.
func setChildProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killChild kills the broker process's group.
func killChild(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
