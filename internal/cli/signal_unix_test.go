//go:build unix

package cli_test

import (
	"os/exec"
	"syscall"
)

// signalPid sends sig to process pid (0: only checks that it exists).
func signalPid(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// ownGroup starts cmd in a process group of its own, which killGroup ends as a whole.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGTERM to the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGTERM) }
