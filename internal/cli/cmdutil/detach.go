package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/workspace"
)

// detachStopWait is how long a background server interrupted before it was ready has to
// stop before it is killed.
const detachStopWait = 10 * time.Second

// Background is a server command (`cotal web`, `cotal a2a`) re-run in the background by
// its --detach flag.
type Background struct {
	Verb       string // the command's name: "web", "a2a"
	What       string // what it serves, for messages: "dashboard", "gateway"
	Root       string // the project's root: the child's working folder
	Pidfile    string // the child's pidfile (it writes it; cotal down reads it)
	LogPath    string // the child's output, appended
	Executable func() (string, error)
	Args       []string // the child's arguments, the verb first; paths absolute
}

// AlreadyRunning is Detach's refusal while one already runs for the project: it reads as
// a Refusal, and holds that one's pid for a caller that says more.
type AlreadyRunning struct {
	PID int
	err error
}

// Error is the refusal's text.
func (e *AlreadyRunning) Error() string { return e.err.Error() }

// Unwrap returns the refusal.
func (e *AlreadyRunning) Unwrap() error { return e.err }

// Detach starts b in the background and returns once it serves, with the address its
// readiness reported and its pid. It refuses with an *AlreadyRunning while one already
// runs for the project (a stale pidfile is removed), and a child that exits or fails
// before it is ready is reported with the last lines of its log.
func Detach(ctx context.Context, b Background) (string, int, error) {
	if rec, err := workspace.ReadPidfile(b.Pidfile); err == nil {
		if alive, _ := rec.Alive(); alive {
			return "", 0, &AlreadyRunning{PID: rec.PID,
				err: Refuse("`cotal "+b.Verb+" --detach`", fmt.Sprintf("a %s already runs for %s (pid %d)", b.What, b.Root, rec.PID), "cotal down "+b.Verb)}
		}
		if err := workspace.RemovePidfile(b.Pidfile); err != nil {
			return "", 0, fmt.Errorf("stale %s: %w", b.Pidfile, err)
		}
	} else if !errors.Is(err, workspace.ErrNoPidfile) {
		return "", 0, fmt.Errorf("read %s: %w", b.Pidfile, err)
	}
	for _, p := range []string{b.Pidfile, b.LogPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", 0, fmt.Errorf("%s folder: %w", b.Verb, err)
		}
	}
	logf, err := os.OpenFile(b.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	cmd, err := launch.Command(b.Executable, b.Args...)
	if err != nil {
		return "", 0, err
	}
	cmd.Dir = b.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := launch.Start(cmd, launch.Options{Session: true})
	if err != nil {
		return "", 0, fmt.Errorf("start background %s: %w", b.What, err)
	}
	addr, err := child.Ready(ctx, detachStopWait) // an interrupt before ready stops it: undo the start
	switch {
	case errors.Is(err, launch.ErrNotReady):
		out, _ := os.ReadFile(b.LogPath)
		return "", 0, fmt.Errorf("background %s did not start (%v); see %s:\n%s", b.What, child.Err(), b.LogPath, lastLines(string(out), 5))
	case err != nil:
		return "", 0, err
	}
	return addr, child.Process.Pid, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ChildArgs are the flags that hand m to a child process of the same binary: --server,
// and --creds and --tls-ca made absolute (a detached child runs in the project's root,
// not where the user typed the command). --space is the caller's to pass.
func (m MeshFlags) ChildArgs() ([]string, error) {
	var args []string
	if m.Server != "" {
		args = append(args, "--server", m.Server)
	}
	return AbsPathArgs(args, "--creds", m.Creds, "--tls-ca", m.TLSCA)
}

// AbsPathArgs appends each flag whose path is set to args, the path made absolute;
// pairs is flag, path, flag, path….
func AbsPathArgs(args []string, pairs ...string) ([]string, error) {
	for i := 0; i+1 < len(pairs); i += 2 {
		flag, path := pairs[i], pairs[i+1]
		if path == "" {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, path, err)
		}
		args = append(args, flag, abs)
	}
	return args, nil
}
