package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithTest has cmd receive SIGTERM when the test process ends, however it ends.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
