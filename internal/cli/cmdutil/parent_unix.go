//go:build unix

package cmdutil

import (
	"os"
	"syscall"
)

// parentPipe opens the inherited pipe fd in non-blocking mode, so the runtime polls it and
// a Close ends a pending read.
func parentPipe(fd int) *os.File {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "parent")
}
