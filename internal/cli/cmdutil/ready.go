package cmdutil

import (
	"fmt"
	"os"
	"strconv"
)

// ReadyFDEnv names an inherited pipe on which a background process (the detached broker,
// a supervised daemon) tells the parent waiting for it that it serves: one line, "ready ...".
const ReadyFDEnv = "COTAL_READY_FD"

// SignalReady writes "ready <what>" to the pipe ReadyFDEnv names and closes it. Without the
// variable it does nothing: the process was started by hand.
func SignalReady(getenv func(string) string, what string) error {
	if getenv == nil {
		return nil
	}
	fdText := getenv(ReadyFDEnv)
	if fdText == "" {
		return nil
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", ReadyFDEnv, fdText, err)
	}
	f := os.NewFile(uintptr(fd), "ready")
	if f == nil {
		return fmt.Errorf("%s=%d: not an open file", ReadyFDEnv, fd)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "ready %s\n", what); err != nil {
		return fmt.Errorf("report readiness: %w", err)
	}
	return nil
}
