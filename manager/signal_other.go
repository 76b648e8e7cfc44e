//go:build !unix

package manager

import (
	"os"
	"syscall"
)

// signalSeat ends the seat's process: without Unix signals and process groups, any signal
// asking it to stop kills it (seats need a terminal, which cotal supervise has on Unix only).
func signalSeat(pid int, proc *os.Process, _ syscall.Signal) {
	if proc == nil {
		p, err := os.FindProcess(pid)
		if err != nil {
			return
		}
		defer p.Release()
		proc = p
	}
	_ = proc.Kill()
}
