package a2a

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
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
	args := []string{"a2a", "--pidfile", pidfile, "--listen", opts.Listen, "--space", t.Space}
	mesh, err := opts.Mesh.ChildArgs()
	if err != nil {
		return err
	}
	args = append(args, mesh...)
	for _, e := range opts.Expose {
		args = append(args, "--expose", e)
	}
	if opts.AllowRemote {
		args = append(args, "--allow-remote")
	}
	for _, h := range opts.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	if args, err = cmdutil.AbsPathArgs(args, "--tls-cert", opts.TLSCert, "--tls-key", opts.TLSKey); err != nil {
		return err
	}
	logPath := LogPath(proj)
	base, pid, err := cmdutil.Detach(ctx, cmdutil.Background{Verb: "a2a", What: "gateway", Root: proj.Root,
		Pidfile: pidfile, LogPath: logPath, Executable: opts.Executable, Args: args})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal a2a: %s/.well-known/agent-card.json (space %s) running in the background, pid %d\n", base, t.Space, pid)
	for _, e := range opts.Expose {
		fmt.Fprintf(opts.IO.Out, "  %s: %s/agents/%s\n", e, base, e[strings.Index(e, ":")+1:])
	}
	fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down a2a`\n", logPath)
	return nil
}
