package web

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/redact"
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
	args := []string{"web", "--no-open", "--pidfile", pidfile, "--host", opts.Host, "--port", strconv.Itoa(opts.Port), "--space", t.Space}
	mesh, err := opts.Mesh.ChildArgs()
	if err != nil {
		return err
	}
	args = append(args, mesh...)
	if opts.AllowRemote {
		args = append(args, "--allow-remote")
	}
	for _, h := range opts.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	logPath := proj.Dir() + string(os.PathSeparator) + LogFileName
	url, pid, err := cmdutil.Detach(ctx, cmdutil.Background{Verb: "web", What: "dashboard", Root: proj.Root,
		Pidfile: pidfile, LogPath: logPath, Executable: opts.Executable, Args: args})
	var running *cmdutil.AlreadyRunning
	switch {
	case errors.As(err, &running):
		// As cotal up --detach does for a running mesh: say where it serves, and succeed.
		if ready := readyLine(logPath); ready != "" {
			// An --allow-remote dashboard's address carries its token: shown once, at its
			// start; here masked (the log has it whole).
			u, space, _ := strings.Cut(ready, " ")
			fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s %s already running in the background, pid %d\n", redact.URL(u), space, running.PID)
		} else {
			fmt.Fprintf(opts.IO.Out, "✓ cotal web already running in the background, pid %d (its address is in %s)\n", running.PID, logPath)
		}
		fmt.Fprintf(opts.IO.ErrOut, "log: %s; to serve with other flags, stop it first with `cotal down web`\n", logPath)
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s (space %s) running in the background, pid %d\n", url, t.Space, pid)
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down web`\n", logPath)
	return nil
}

// readyLine is what follows "✓ cotal web: " on the last such line of the log, the
// running dashboard's "URL (space S)" (it prints it before its pidfile), or "".
func readyLine(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	last := ""
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, "✓ cotal web: "); ok {
			last = strings.TrimSpace(rest)
		}
		if err != nil {
			return last
		}
	}
}
