//go:build !linux

package bench

import "os/exec"

// setChildProcAttr leaves the broker process's attributes alone: without Linux's
// Pdeathsig it ends when its stdin closes, which this process's exit does.
func setChildProcAttr(*exec.Cmd) {}

// killChild kills the broker process.
func killChild(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
}
