//go:build !unix

package cli_test

import (
	"os"
	"os/exec"
	"syscall"
)

// signalPid kills process pid for any signal but 0, which only checks that it exists:
// without Unix signals there is nothing gentler to send.
func signalPid(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	if sig == 0 {
		return nil
	}
	return p.Kill()
}

// ownGroup leaves cmd as it is: without Unix process groups killGroup ends the process.
func ownGroup(*exec.Cmd) {}

// killGroup ends process pid.
func killGroup(pid int) error { return signalPid(pid, syscall.SIGTERM) }
