//go:build unix

package web_test

import (
	"os"
	"strconv"
	"syscall"
)

// bareFD duplicates f's descriptor into one no *os.File owns, and names it as a ready
// pipe's variable does.
func bareFD(f *os.File) (string, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	return strconv.Itoa(fd), err
}
