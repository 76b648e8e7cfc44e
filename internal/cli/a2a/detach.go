package a2a

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/workspace"
)

// PidPath is the pidfile of the project's detached gateway (in .cotal/a2a/); cotal down
// reads it.
func PidPath(p *workspace.Project) string { return filepath.Join(p.Dir(), "a2a", "serve.pid") }

// LogPath is the log of the project's detached gateway (in .cotal/a2a/).
func LogPath(p *workspace.Project) string { return filepath.Join(p.Dir(), "a2a", "serve.log") }

// URLPath is where a serving gateway records its URL (removed when it stops); cotal
// status reads it.
func URLPath(p *workspace.Project) string { return filepath.Join(p.Dir(), "a2a", "serve.url") }

// stopWait is how long a gateway interrupted before it was ready has to stop before it
// is killed.
const stopWait = 10 * time.Second

// detach re-runs `cotal a2a` in the background with its output in .cotal/a2a/serve.log
// and its pidfile .cotal/a2a/serve.pid, and returns once the child serves (or says why it
// did not). The child gets the same flags, with file paths made absolute (it runs in the
// project's root).
func detach(ctx context.Context, opts *Options, t cmdutil.Target) error {
	proj := t.Project
	if proj == nil {
		return cmdutil.Refuse("`cotal a2a --detach` outside a project", "a detached gateway keeps its pidfile and log in the project's .cotal/a2a/",
			"cotal a2a --expose "+opts.Expose[0]+"  # in the foreground, or cd to the project first")
	}
	pidfile := PidPath(proj)
	if rec, err := workspace.ReadPidfile(pidfile); err == nil {
		if alive, _ := rec.Alive(); alive {
			return cmdutil.Refuse("`cotal a2a --detach`", fmt.Sprintf("a gateway already runs for %s (pid %d)", proj.Root, rec.PID), "cotal down a2a")
		}
		if err := workspace.RemovePidfile(pidfile); err != nil {
			return fmt.Errorf("stale %s: %w", pidfile, err)
		}
	} else if !errors.Is(err, workspace.ErrNoPidfile) {
		return fmt.Errorf("read %s: %w", pidfile, err)
	}
	if err := os.MkdirAll(filepath.Dir(pidfile), 0o700); err != nil {
		return fmt.Errorf("a2a folder: %w", err)
	}
	args := []string{"a2a", "--pidfile", pidfile, "--listen", opts.Listen, "--space", t.Space}
	if opts.Mesh.Server != "" {
		args = append(args, "--server", opts.Mesh.Server)
	}
	for _, e := range opts.Expose {
		args = append(args, "--expose", e)
	}
	if opts.AllowRemote {
		args = append(args, "--allow-remote")
	}
	for _, h := range opts.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	for _, f := range []struct{ flag, path string }{{"--creds", opts.Mesh.Creds}, {"--tls-ca", opts.Mesh.TLSCA}, {"--tls-cert", opts.TLSCert}, {"--tls-key", opts.TLSKey}} {
		if f.path == "" {
			continue
		}
		abs, err := filepath.Abs(f.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		args = append(args, f.flag, abs)
	}
	logPath := LogPath(proj)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	cmd, err := launch.Command(opts.Executable, args...)
	if err != nil {
		return err
	}
	cmd.Dir = proj.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := launch.Start(cmd, launch.Options{Session: true})
	if err != nil {
		return fmt.Errorf("start background gateway: %w", err)
	}
	base, err := child.Ready(ctx, stopWait) // an interrupt before ready stops it: undo the start
	switch {
	case errors.Is(err, launch.ErrNotReady):
		b, _ := os.ReadFile(logPath)
		return fmt.Errorf("background gateway did not start (%v); see %s:\n%s", child.Err(), logPath, lastLines(string(b), 5))
	case err != nil:
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal a2a: %s/.well-known/agent-card.json (space %s) running in the background, pid %d\n", base, t.Space, child.Process.Pid)
	for _, e := range opts.Expose {
		fmt.Fprintf(opts.IO.Out, "  %s: %s/agents/%s\n", e, base, e[strings.Index(e, ":")+1:])
	}
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down a2a`\n", logPath)
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
