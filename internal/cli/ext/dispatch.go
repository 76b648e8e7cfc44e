package ext

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/extension"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// Hook runs before the command tree parses args. For `cotal --version` it makes the
// version text list every extension's version after cotal's. For `cotal <name> ...` where
// name is no built-in command but an installed extension, it runs cotal-<name> and reports
// handled; its exit code comes back as a *cmdutil.ExitError. Anything else is left to cobra.
func Hook(ctx context.Context, f *cmdutil.Factory, root *cobra.Command, args []string) (handled bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	if strings.HasPrefix(args[0], "-") && slices.Contains(args, "--version") {
		root.SetVersionTemplate(versionText(f, root))
		return false, nil
	}
	name := args[0]
	if strings.HasPrefix(name, "-") || extension.ValidName(name) != nil || reservedNames(root)(name) {
		return false, nil
	}
	dir, err := f.ExtensionsDir()
	if err != nil {
		return false, nil // no config folder: no extensions, and cobra names the unknown command
	}
	p := &extension.Prefix{Dir: dir}
	lf, err := p.ReadLockfile()
	if err != nil {
		return true, fmt.Errorf("cotal %s: %w", name, err)
	}
	rec, ok := lf.Find(name)
	if !ok {
		return false, nil
	}
	return true, run(ctx, f, root, p, rec, args[1:])
}

// versionText is cotal's version line and one line per extension, as a cobra template.
func versionText(f *cmdutil.Factory, root *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cotal version %s\n", root.Version)
	if dir, err := f.ExtensionsDir(); err == nil {
		lf, err := (&extension.Prefix{Dir: dir}).ReadLockfile()
		if err != nil {
			fmt.Fprintf(&b, "extensions: %v\n", err)
		} else {
			for _, r := range lf.Extensions {
				fmt.Fprintf(&b, "%s%s version %s (%s)\n", extension.ExecPrefix, r.Name, r.Version, party(r))
			}
		}
	}
	return strings.ReplaceAll(b.String(), "{{", `{{"{{"}}`) // literal text, whatever a version holds
}

// run executes the extension with the caller's streams and the mesh context.
func run(ctx context.Context, f *cmdutil.Factory, root *cobra.Command, p *extension.Prefix, rec extension.Record, args []string) error {
	path := p.Path(rec)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Args[0] = extension.ExecPrefix + rec.Name
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f.IO.In, f.IO.Out, f.IO.ErrOut
	cmd.Env = append(os.Environ(), Env(f, root.Version, rec.Name)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exitErr):
		code := exitErr.ExitCode()
		if code < 0 { // killed by a signal
			code = 1
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		return &cmdutil.ExitError{Code: code}
	case errors.Is(err, os.ErrNotExist):
		return cmdutil.Refuse("cotal "+rec.Name, "its file "+path+" is missing", "cotal update")
	default:
		return fmt.Errorf("cotal %s: %w", rec.Name, err)
	}
}

// Env is the environment an extension gets on top of cotal's: COTAL_VERSION,
// COTAL_EXTENSION, COTAL_CONFIG_DIR, COTAL_BIN, and, when a mesh is found as other
// commands find it (COTAL_SPACE and COTAL_SERVER count as --space and --server),
// COTAL_SPACE, COTAL_SERVER and COTAL_PROJECT.
func Env(f *cmdutil.Factory, version, name string) []string {
	env := []string{"COTAL_VERSION=" + version, "COTAL_EXTENSION=" + name}
	if d, err := f.ConfigDir(); err == nil {
		env = append(env, "COTAL_CONFIG_DIR="+d)
	}
	if exe, err := f.Executable(); err == nil {
		env = append(env, "COTAL_BIN="+exe)
	}
	t, err := f.Resolve(cmdutil.MeshFlags{Space: f.Getenv("COTAL_SPACE"), Server: f.Getenv("COTAL_SERVER")})
	if t.Project != nil {
		env = append(env, "COTAL_PROJECT="+t.Project.Root)
	}
	if err == nil {
		env = append(env, "COTAL_SPACE="+t.Space, "COTAL_SERVER="+t.Server)
	}
	return env
}
