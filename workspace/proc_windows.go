//go:build windows

package workspace

import (
	"errors"
	"os"
	"syscall"
)

// processStart reports whether process pid exists by opening it (access denied still means
// it does); the start time is empty here, so a reused pid is not detected (see Record).
func processStart(pid int) (string, error) {
	p, err := os.FindProcess(pid)
	switch {
	case err == nil:
		return "", p.Release()
	case errors.Is(err, syscall.ERROR_ACCESS_DENIED):
		return "", nil
	case errors.Is(err, syscall.Errno(87)): // ERROR_INVALID_PARAMETER: no such pid
		return "", errProcessGone
	default:
		return "", err
	}
}
