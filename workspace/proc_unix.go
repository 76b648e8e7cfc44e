//go:build unix && !linux

package workspace

import (
	"errors"
	"syscall"
)

// processStart reports whether process pid exists (signal 0: EPERM still means it does);
// the start time is empty here, so a reused pid is not detected (see Record). A zombie
// counts as running.
func processStart(pid int) (string, error) {
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return "", nil
	case errors.Is(err, syscall.ESRCH):
		return "", errProcessGone
	default:
		return "", err
	}
}
