//go:build !unix && !windows

package workspace

import (
	"fmt"
	"runtime"
)

// processStart cannot tell whether a process runs on this system.
func processStart(pid int) (string, error) {
	return "", fmt.Errorf("process checks are not supported on %s", runtime.GOOS)
}
