//go:build windows

package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/windows"
)

// closeEndsRead: a synchronous read of an anonymous pipe is not ended by a Close, so the
// lifeline's stop does not wait for it (it ends with the parent or this process).
const closeEndsRead = false

// inherit marks files inheritable and hands them to cmd as inherited handles (Windows
// has no numbered descriptors past stderr), and returns the handle values.
func inherit(cmd *exec.Cmd, files []*os.File) ([]string, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	names := make([]string, len(files))
	for i, f := range files {
		h := syscall.Handle(f.Fd())
		if err := syscall.SetHandleInformation(h, syscall.HANDLE_FLAG_INHERIT, syscall.HANDLE_FLAG_INHERIT); err != nil {
			return nil, fmt.Errorf("hand %s to the child: %w", f.Name(), err)
		}
		cmd.SysProcAttr.AdditionalInheritedHandles = append(cmd.SysProcAttr.AdditionalInheritedHandles, h)
		names[i] = strconv.FormatUint(uint64(h), 10)
	}
	return names, nil
}

// detach starts the child in a process group of its own and, for a session, without the
// console.
func detach(cmd *exec.Cmd, session bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= syscall.CREATE_NEW_PROCESS_GROUP
	if session {
		cmd.SysProcAttr.CreationFlags |= windows.DETACHED_PROCESS
	}
}

func terminate(p *os.Process) error { return p.Kill() }

// inherited opens the handle v names.
func inherited(v, name string) (*os.File, error) {
	h, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, errors.New("want a handle number")
	}
	f := os.NewFile(uintptr(h), name)
	if f == nil {
		return nil, errors.New("not an open handle")
	}
	return f, nil
}

func lifelinePipe(v string) (*os.File, error) { return inherited(v, "lifeline") }
