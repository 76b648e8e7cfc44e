//go:build unix

package launch

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// closeEndsRead: closing the lifeline (non-blocking, polled) ends a pending read.
const closeEndsRead = true

// inherit hands files to cmd as the file descriptors after those it already inherits,
// and returns their numbers.
func inherit(cmd *exec.Cmd, files []*os.File) ([]string, error) {
	names := make([]string, len(files))
	for i := range files {
		names[i] = strconv.Itoa(3 + len(cmd.ExtraFiles) + i)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
	return names, nil
}

// detach puts the child in a session of its own, or a process group of its own.
func detach(cmd *exec.Cmd, session bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if session {
		cmd.SysProcAttr.Setsid = true
	} else {
		cmd.SysProcAttr.Setpgid = true
	}
}

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// inherited opens the file descriptor v names.
func inherited(v, name string) (*os.File, error) {
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, errors.New("want a file descriptor number")
	}
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, errors.New("not an open file")
	}
	return f, nil
}

// lifelinePipe opens the inherited pipe v names in non-blocking mode, so the runtime
// polls it and a Close ends a pending read.
func lifelinePipe(v string) (*os.File, error) {
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, errors.New("want a file descriptor number")
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, errors.New("not an open pipe")
	}
	return os.NewFile(uintptr(fd), "lifeline"), nil
}
