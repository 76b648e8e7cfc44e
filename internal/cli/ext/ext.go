// Package ext implements `cotal ext add|rm|list` and runs extensions: `cotal <name> ...`
// runs the installed executable cotal-<name> with the mesh context in its environment.
package ext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/extension"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/selfupdate"
)

// Options are the flags of `cotal ext add|rm|list`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Getwd         func() (string, error)
	Getenv        func(string) string
	ConfigHome    func() (string, error)
	ExtensionsDir func() (string, error)
	Logger        *slog.Logger // nil means discard

	Spec       string // add: local path or module path@version
	Name       string // add: extension name; rm: the one to remove
	FirstParty bool   // add --first-party
	Reinstall  bool   // add --reinstall
	JSON       bool   // list --json

	Reserved func(name string) bool // add: built-in command names
}

// NewCmdExt builds `cotal ext` and its subcommands; runF, when set, replaces the run of
// each subcommand (its first argument names it: "add", "rm", "list").
func NewCmdExt(f *cmdutil.Factory, runF func(context.Context, string, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ext <command>",
		Short: "Add, remove and list operator extensions (cotal-<name> executables)",
		Long: `An operator extension is an executable named cotal-<name>; once added, ` + "`cotal <name> ...`" + ` runs it
with the mesh context in its environment (COTAL_VERSION, COTAL_SPACE, COTAL_SERVER when a
mesh is found). Extensions live in the extensions prefix, $XDG_CONFIG_HOME/cotal/extensions,
and its lock records each one's name, version, spec, SHA-256 and whether it is first-party.`,
		Example: `  cotal ext add ./bin/cotal-hello          # a local executable
  cotal ext add github.com/cotal-ai/cotal-web@v0.3.0
  cotal ext list --json
  cotal ext rm hello`,
	}
	run := func(name string, opts *Options, def func(context.Context, *Options) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), name, opts)
			}
			return def(c.Context(), opts)
		}
	}

	add := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, ExtensionsDir: f.ExtensionsDir, Logger: f.Logger}
	addCmd := &cobra.Command{
		Use:   "add <spec> [--name <name>] [--first-party] [--reinstall]",
		Short: "Install an extension from a local executable or a Go module path@version",
		Long: `Install an extension. <spec> is a local executable (./bin/cotal-hello, /opt/cotal-hello) or a
Go module path@version, built with ` + "`go install`" + ` into a temp GOBIN. The executable must answer
--version; the last word of its first line is the version the lock records.

A module under github.com/cotal-ai/ is first-party. --first-party marks a local executable
first-party (a release build of a first-party extension): ` + "`cotal update`" + ` then verifies it in
place while it is at cotal's version, and reinstalls it from its path otherwise.`,
		Example: `  cotal ext add ./bin/cotal-hello
  cotal ext add github.com/cotal-ai/cotal-web@v0.3.0
  cotal ext add ./bin/cotal-hello --name hi --reinstall`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(c *cobra.Command, args []string) error {
			add.Spec = args[0]
			if add.Name != "" {
				if err := extension.ValidName(add.Name); err != nil {
					return cmdutil.FlagErrorf("--name: %v", err)
				}
			}
			add.Reserved = reservedNames(c.Root())
			return nil
		},
		RunE: run("add", add, runAdd),
	}
	addCmd.Flags().StringVar(&add.Name, "name", "", "extension name (default: from the file name cotal-<name>)")
	addCmd.Flags().BoolVar(&add.FirstParty, "first-party", false, "mark a local executable first-party")
	addCmd.Flags().BoolVar(&add.Reinstall, "reinstall", false, "replace the installed extension of the same name")

	rm := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, ExtensionsDir: f.ExtensionsDir, Logger: f.Logger}
	rmCmd := &cobra.Command{
		Use:     "rm <name>",
		Aliases: []string{"remove"},
		Short:   "Remove an extension",
		Example: `  cotal ext rm hello`,
		Args:    cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			rm.Name = args[0]
			return nil
		},
		RunE: run("rm", rm, runRemove),
	}

	list := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, ExtensionsDir: f.ExtensionsDir, Logger: f.Logger}
	listCmd := &cobra.Command{
		Use:     "list [--json]",
		Aliases: []string{"ls"},
		Short:   "List extensions with their version, spec and whether their file is intact",
		Example: `  cotal ext list
  cotal ext list --json`,
		Args: cobra.NoArgs,
		RunE: run("list", list, runList),
	}
	listCmd.Flags().BoolVar(&list.JSON, "json", false, "print one JSON document")

	cmd.AddCommand(addCmd, rmCmd, listCmd)
	return cmdutil.Group(cmd)
}

// reservedNames are the names of root's commands, their aliases, help and completion.
func reservedNames(root *cobra.Command) func(string) bool {
	return func(name string) bool {
		if name == "help" || name == "completion" {
			return true
		}
		for _, c := range root.Commands() {
			if c.Name() == name || c.HasAlias(name) {
				return true
			}
		}
		return false
	}
}

// prefix returns the extensions prefix after checking the config folder's ancestors: the
// prefix holds executables every later run trusts.
func prefix(opts *Options) (*extension.Prefix, error) {
	home, err := opts.ConfigHome()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(home, "cotal")
	chk := selfupdate.AncestorCheck{UID: os.Geteuid()}
	if err := chk.CheckAncestors(selfupdate.Root{Label: "operator config", Path: dir, Env: "XDG_CONFIG_HOME", Base: home}); err != nil {
		return nil, Unsafe("a change to the extensions", err)
	}
	return &extension.Prefix{Dir: filepath.Join(dir, "extensions"), Logger: opts.Logger}, nil
}

// Unsafe turns an *selfupdate.UnsafeAncestorError into a refusal; other errors pass through.
func Unsafe(what string, err error) error {
	var u *selfupdate.UnsafeAncestorError
	if !errors.As(err, &u) {
		return err
	}
	return cmdutil.Refuse(what, fmt.Sprintf("%s is under %s, which %s, so another user could change what cotal runs", u.Root.Path, u.Path, u.Reason), u.Fix)
}

// lock takes (or borrows, in an update child) the prefix lock.
func lock(ctx context.Context, getenv func(string) string, p *extension.Prefix, what string) (*extension.Guard, error) {
	g, err := p.Acquire(ctx, getenv)
	if errors.Is(err, extension.ErrBusy) {
		return nil, cmdutil.Refuse(what, err.Error(), "cotal ext list")
	}
	return g, err
}

func runAdd(ctx context.Context, opts *Options) error {
	wd, err := opts.Getwd()
	if err != nil {
		return fmt.Errorf("current folder: %w", err)
	}
	if err := checkLocalExecutable(opts.Spec, wd); err != nil {
		return err
	}
	p, err := prefix(opts)
	if err != nil {
		return err
	}
	what := "`cotal ext add " + opts.Spec + "`"
	g, err := lock(ctx, opts.Getenv, p, what)
	if err != nil {
		return err
	}
	defer g.Release()
	rec, err := p.Install(ctx, g, extension.InstallRequest{Spec: opts.Spec, Wd: wd, Name: opts.Name,
		FirstParty: opts.FirstParty, Replace: opts.Reinstall, Reserved: opts.Reserved})
	name := suggestName(opts.Name, opts.Spec, opts.Reserved)
	switch {
	case errors.Is(err, extension.ErrExists):
		return cmdutil.Refuse(what, err.Error(), "cotal ext add --reinstall "+opts.Spec)
	case errors.Is(err, extension.ErrReserved):
		return cmdutil.Refuse(what, err.Error()+": give it another name with --name", "")
	case errors.Is(err, extension.ErrBadName) && name != "":
		return cmdutil.Refuse(what, err.Error(), "cotal ext add --name "+name+" "+cmdutil.ShellQuote(opts.Spec))
	case errors.Is(err, extension.ErrBadName):
		return cmdutil.Refuse(what, err.Error()+": give it a name with --name", "")
	case errors.Is(err, extension.ErrNoGo):
		return cmdutil.Refuse(what, "a module spec is built with `go install`: "+err.Error()+"; install Go, or add a built cotal-<name> program by its path", "")
	case errors.Is(err, extension.ErrNoVersion):
		return cmdutil.Refuse(what, "an extension must answer --version with its version: "+err.Error(), opts.Spec+" --version")
	case err != nil:
		return err
	}
	if err := g.Release(); err != nil {
		return err
	}
	verb := "added"
	if opts.Reinstall {
		verb = "reinstalled"
	}
	fmt.Fprintf(opts.IO.Out, "✓ %s %s@%s (%s) from %s\n", verb, rec.Name, rec.Version, party(rec), rec.Spec)
	return nil
}

// checkLocalExecutable refuses, before anything is written, a local spec that is not an
// executable file: an extension runs as a program, so a file without an execute bit (a
// script saved with mode 0644) is not one yet. Module specs pass; Install checks the rest.
func checkLocalExecutable(spec, wd string) error {
	s, err := extension.ParseSpec(spec, wd)
	if err != nil || s.File == "" {
		return nil // Install reports a bad spec in its own words
	}
	fi, err := os.Stat(s.File)
	if err != nil || !fi.Mode().IsRegular() {
		return nil // Install says what is missing or wrong
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return cmdutil.RefuseUsage("`cotal ext add "+spec+"`",
			fmt.Sprintf("%s is not executable (mode %04o): an extension is a program cotal runs", s.File, fi.Mode().Perm()),
			"chmod +x "+cmdutil.ShellQuote(s.File)+" && cotal ext add "+cmdutil.ShellQuote(spec))
	}
	return nil
}

func party(r extension.Record) string {
	if r.FirstParty {
		return "first-party"
	}
	return "third-party"
}

func runRemove(ctx context.Context, opts *Options) error {
	p, err := prefix(opts)
	if err != nil {
		return err
	}
	what := "`cotal ext rm " + opts.Name + "`"
	g, err := lock(ctx, opts.Getenv, p, what)
	if err != nil {
		return err
	}
	defer g.Release()
	rec, err := p.Remove(g, opts.Name)
	if errors.Is(err, extension.ErrNotInstalled) {
		return cmdutil.Refuse(what, "no extension named "+opts.Name+" is installed", "cotal ext list")
	}
	if err != nil {
		return err
	}
	if err := g.Release(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ removed %s@%s\n", rec.Name, rec.Version)
	return nil
}

// ListEntry is one extension in `cotal ext list --json`.
type ListEntry struct {
	extension.Record
	Path   string              `json:"path"`   // absolute path of the executable
	Status extension.FileState `json:"status"` // ok, missing or modified
}

// List is what `cotal ext list --json` prints.
type List struct {
	Prefix     string      `json:"prefix"`
	Extensions []ListEntry `json:"extensions"`
}

func runList(_ context.Context, opts *Options) error {
	dir, err := opts.ExtensionsDir()
	if err != nil {
		return err
	}
	p := &extension.Prefix{Dir: dir}
	lf, err := p.ReadLockfile()
	if err != nil {
		return err
	}
	out := List{Prefix: dir, Extensions: []ListEntry{}}
	for _, r := range lf.Extensions {
		st, err := p.Check(r)
		if err != nil {
			return err
		}
		out.Extensions = append(out.Extensions, ListEntry{Record: r, Path: p.Path(r), Status: st})
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(opts.IO.ErrOut, "extensions prefix: %s\n", dir)
	if len(out.Extensions) == 0 {
		fmt.Fprintln(opts.IO.Out, "no extensions installed")
		return nil
	}
	for _, e := range out.Extensions {
		fmt.Fprintf(opts.IO.Out, "%-16s %-12s %-11s %-8s %s\n", e.Name, e.Version, party(e.Record), e.Status, e.Spec)
	}
	return nil
}

// suggestName is the extension name a next line offers when the name given (or, without
// one, the spec's file name) is not one: it lowercased, with each other character a dash,
// or "" when that is still no valid name or a built-in command's.
func suggestName(given, spec string, reserved func(string) bool) string {
	from := given
	if from == "" {
		from = strings.TrimSuffix(filepath.Base(spec), ".exe")
		from = strings.TrimPrefix(from, extension.ExecPrefix)
	}
	name := strings.Trim(strings.Map(func(c rune) rune {
		switch {
		case c >= 'A' && c <= 'Z':
			return c + 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
			return c
		}
		return '-'
	}, from), "-_")
	if name == given || extension.ValidName(name) != nil || (reserved != nil && reserved(name)) {
		return ""
	}
	return name
}
