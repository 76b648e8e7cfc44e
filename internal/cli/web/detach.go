package web

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
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
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s (space %s) running in the background, pid %d\n", url, t.Space, pid)
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down web`\n", logPath)
	return nil
}
