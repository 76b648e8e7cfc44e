//go:build unix

package broker

import (
	"fmt"
	"syscall"
)

// raiseOpenFiles raises the process's soft open-file limit to its hard limit (the Go
// runtime does so at process start; this undoes a lower limit set since) and returns
// both. A failed raise keeps the old limit, which is returned with the error.
func raiseOpenFiles() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read open-file limit: %w", err)
	}
	if lim.Cur >= lim.Max {
		return uint64(lim.Cur), uint64(lim.Max), nil
	}
	raised := lim
	raised.Cur = raised.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return uint64(lim.Cur), uint64(lim.Max), fmt.Errorf("raise open-file limit from %d to %d: %w", lim.Cur, lim.Max, err)
	}
	return uint64(raised.Cur), uint64(raised.Max), nil
}

// openFileLimit is the process's open-file limit now, soft and hard.
func openFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read open-file limit: %w", err)
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
