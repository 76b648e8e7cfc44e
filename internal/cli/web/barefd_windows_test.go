//go:build windows

package web_test

import (
	"os"
	"strconv"

	"golang.org/x/sys/windows"
)

// bareFD duplicates f's handle into one no *os.File owns, and names it as a ready pipe's
// variable does.
func bareFD(f *os.File) (string, error) {
	self := windows.CurrentProcess()
	var h windows.Handle
	err := windows.DuplicateHandle(self, windows.Handle(f.Fd()), self, &h, 0, false, windows.DUPLICATE_SAME_ACCESS)
	return strconv.FormatUint(uint64(h), 10), err
}
