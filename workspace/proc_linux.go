//go:build linux

package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// processStart returns the start time of process pid in clock ticks since boot, field 22 of
// /proc/<pid>/stat. It returns errProcessGone when no such process runs, including a zombie
// (exited, not yet reaped: it serves nothing and ignores signals).
func processStart(pid int) (string, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return "", errProcessGone
	}
	if err != nil {
		return "", err
	}
	return parseStat(path, data)
}

// parseStat extracts the start time from the text of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and ')', so fields are counted
// from the last ')'.
func parseStat(path string, data []byte) (string, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", fmt.Errorf("%s: no command name", path)
	}
	fields := bytes.Fields(data[i+1:]) // fields[0] is field 3 (state)
	if len(fields) < 20 {
		return "", fmt.Errorf("%s: %d fields, want at least 22", path, len(fields)+2)
	}
	if state := string(fields[0]); state == "Z" || state == "X" {
		return "", errProcessGone
	}
	start := string(fields[19]) // field 22
	if _, err := strconv.ParseUint(start, 10, 64); err != nil {
		return "", fmt.Errorf("%s: start time %q is not a number", path, start)
	}
	return start, nil
}
