//go:build unix

package manager

import (
	"os"
	"syscall"
)

// signalSeat sends sig to the seat's process group (the seat leads its own session and
// process group) and to its process.
func signalSeat(pid int, proc *os.Process, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
	if proc != nil {
		_ = proc.Signal(sig)
	} else {
		_ = syscall.Kill(pid, sig)
	}
}
