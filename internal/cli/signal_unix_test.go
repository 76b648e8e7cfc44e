//go:build unix

package cli_test

import "syscall"

// signalPid sends sig to process pid (0: only checks that it exists).
func signalPid(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
