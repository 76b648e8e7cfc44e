package web

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/workspace"
)

// detach re-runs `cotal web` in the background with its output in .cotal/web.log and its
// pidfile .cotal/web.pid, and returns once the child serves (or says why it did not).
func detach(ctx context.Context, opts *Options, t cmdutil.Target) error {
	proj := t.Project
	if proj == nil {
		return cmdutil.Refuse("`cotal web --detach` outside a project", "a detached dashboard keeps its pidfile and log in the project's .cotal/",
			"cotal web  # in the foreground, or cd to the project first")
	}
	pidfile := pidPath(proj.Dir())
	if rec, err := workspace.ReadPidfile(pidfile); err == nil {
		if alive, _ := rec.Alive(); alive {
			return cmdutil.Refuse("`cotal web --detach`", fmt.Sprintf("a dashboard already runs for %s (pid %d)", proj.Root, rec.PID), "cotal down web")
		}
		if err := workspace.RemovePidfile(pidfile); err != nil {
			return fmt.Errorf("stale %s: %w", pidfile, err)
		}
	} else if !errors.Is(err, workspace.ErrNoPidfile) {
		return fmt.Errorf("read %s: %w", pidfile, err)
	}
	logPath := proj.Dir() + string(os.PathSeparator) + LogFileName
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	args := []string{"web", "--no-open", "--pidfile", pidfile, "--host", opts.Host, "--port", strconv.Itoa(opts.Port), "--space", t.Space}
	if opts.Mesh.Server != "" {
		args = append(args, "--server", opts.Mesh.Server)
	}
	if opts.Mesh.Creds != "" {
		args = append(args, "--creds", opts.Mesh.Creds)
	}
	if opts.AllowRemote {
		args = append(args, "--allow-remote")
	}
	for _, h := range opts.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	cmd, err := launch.Command(opts.Executable, args...)
	if err != nil {
		return err
	}
	cmd.Dir = proj.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := launch.Start(cmd, launch.Options{Session: true})
	if err != nil {
		return fmt.Errorf("start background dashboard: %w", err)
	}
	url, err := child.Ready(ctx, stopWait) // an interrupt before ready stops it: undo the start
	switch {
	case errors.Is(err, launch.ErrNotReady):
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("background dashboard did not start (%v); see %s:\n%s", child.Err(), logPath, lastLines(string(b), 5))
	case err != nil:
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s (space %s) running in the background, pid %d\n", url, t.Space, child.Process.Pid)
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down web`\n", logPath)
	return nil
}

// stopWait is how long a dashboard interrupted before it was ready has to stop before it
// is killed.
const stopWait = 10 * time.Second

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
