// Package setup implements `cotal setup`: seed the operator config and the default persona,
// announcing each write; once seeded, print a read-only status card. It starts nothing.
package setup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/extension"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	cliext "github.com/cotal-ai/cotal/internal/cli/ext"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/selfupdate"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal setup`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Getwd       func() (string, error)
	Getenv      func(string) string
	ConfigHome  func() (string, error)
	MachineHome func() (string, error)
	Yes         bool // --yes: do not ask (also the behaviour without a terminal)
}

// NewCmdSetup builds `cotal setup`.
func NewCmdSetup(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, MachineHome: f.MachineHome}
	cmd := &cobra.Command{
		Use:   "setup [--yes]",
		Short: "Seed the operator config and the default persona; later, show a status card",
		Long: `Configure this machine and project; nothing is started. The first run writes the operator
config ($XDG_CONFIG_HOME/cotal/config.json, {}) and the default persona
(.cotal/agents/default.md in the project, created in the current folder when there is
none), announcing each write. Files that exist are never touched: ` + "`cotal update`" + ` repairs them.
Once everything is seeded, setup prints a read-only status card: config, persona, broker,
mesh and extensions.

On a terminal setup asks before writing; --yes (and any run without a terminal, or whose
input ends before an answer) does not.`,
		Example: `  cotal setup
  cotal setup --yes     # scripts and agents`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSetup(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask before writing")
	return cmd
}

func runSetup(_ context.Context, opts *Options) error {
	cfgHome, err := opts.ConfigHome()
	if err != nil {
		return err
	}
	config := filepath.Join(cfgHome, "cotal")
	proj, err := project(opts)
	if err != nil {
		return err
	}
	cfg, err := selfupdate.ReadConfigState(config)
	if err != nil {
		return err
	}
	var missing []string
	if cfg.Missing {
		missing = append(missing, filepath.Join(config, selfupdate.ConfigName))
	}
	for _, p := range selfupdate.SeedPersonas() {
		st, err := selfupdate.ReadPersonaState(proj.Dir(), p)
		if err != nil {
			return err
		}
		if st == selfupdate.PersonaMissing {
			missing = append(missing, selfupdate.PersonaPath(proj.Dir(), p.Name))
		}
	}
	if len(missing) == 0 {
		return statusCard(opts, config, proj)
	}
	if !opts.Yes && opts.IO.IsStdinTTY() && !confirm(opts.IO, missing) {
		fmt.Fprintln(opts.IO.ErrOut, "nothing written")
		return nil
	}
	chk := selfupdate.AncestorCheck{UID: os.Geteuid()}
	if err := chk.CheckAncestors(selfupdate.Root{Label: "operator config", Path: config, Env: "XDG_CONFIG_HOME", Base: cfgHome},
		selfupdate.Root{Label: "project state", Path: proj.Dir(), Base: proj.Root}); err != nil {
		return cliext.Unsafe("setup", err)
	}
	notes, err := selfupdate.SeedConfig(config)
	if err == nil {
		var more []selfupdate.Note
		if _, err = workspace.Open(proj.Root); err == nil {
			more, err = selfupdate.SeedPersonaFiles(proj.Dir())
		}
		notes = append(notes, more...)
	}
	for _, n := range notes {
		fmt.Fprintln(opts.IO.Out, n.String())
	}
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if cmdutil.MeshRunning(proj) {
		fmt.Fprintln(opts.IO.Out, "next: run `cotal spawn --name ada`") // the mesh is up: an agent joins it
	} else {
		fmt.Fprintln(opts.IO.Out, "next: run `cotal up --detach`")
	}
	return nil
}

// project returns the project found from the current folder, or the current folder as
// one (its .cotal is created only when setup writes). The machine home is never a project.
func project(opts *Options) (*workspace.Project, error) {
	wd, err := opts.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, opts.Getenv)
	if !errors.Is(err, workspace.ErrNoProject) {
		return proj, err
	}
	home, err := opts.MachineHome()
	if err != nil {
		return nil, err
	}
	p := &workspace.Project{Root: wd}
	if filepath.Clean(p.Dir()) == filepath.Clean(home) {
		return nil, cmdutil.Refuse("setup in "+wd, p.Dir()+" is the machine home (COTAL_HOME), not a project", cmdutil.NewProjectNext(wd, ""))
	}
	if err := workspace.ControlFile(wd); err != nil {
		return nil, fmt.Errorf("setup in %s: %w", wd, err)
	}
	return p, nil
}

// confirm asks once on a terminal whether to write the files. Input that ends before any
// answer (stdin is /dev/null, which looks like a terminal) counts as --yes.
func confirm(io *iostreams.IOStreams, files []string) bool {
	fmt.Fprintln(io.ErrOut, "cotal setup will write:")
	for _, f := range files {
		fmt.Fprintln(io.ErrOut, "  "+f)
	}
	fmt.Fprint(io.ErrOut, "continue? [Y/n] ")
	line, err := bufio.NewReader(io.In).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(io.ErrOut, "(no answer: going on as with --yes)")
		return true
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "" || a == "y" || a == "yes"
}

// statusCard prints the read-only status of config, persona, broker, mesh and extensions.
func statusCard(opts *Options, config string, proj *workspace.Project) error {
	out := opts.IO.Out
	line := func(ok bool, what, text string) {
		mark := "✓"
		if !ok {
			mark = "○"
		}
		fmt.Fprintf(out, "%s %-11s %s\n", mark, what, text)
	}
	fmt.Fprintln(out, "cotal · status")
	cfg, err := selfupdate.ReadConfigState(config)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(config, selfupdate.ConfigName)
	if cfg.Corrupt != "" {
		fmt.Fprintf(out, "✗ %-11s %s is %s · repair: cotal update\n", "config", cfgPath, cfg.Corrupt)
	} else {
		line(true, "config", cfgPath)
	}
	for _, p := range selfupdate.SeedPersonas() {
		st, err := selfupdate.ReadPersonaState(proj.Dir(), p)
		if err != nil {
			return err
		}
		text := p.Name + " · " + selfupdate.PersonaPath(proj.Dir(), p.Name)
		switch st {
		case selfupdate.PersonaUser:
			text += " (yours: no managed marker)"
		case selfupdate.PersonaStale, selfupdate.PersonaCorrupt:
			text += " (" + string(st) + " · repair: cotal update)"
		}
		line(st == selfupdate.PersonaCurrent || st == selfupdate.PersonaUser, "persona", text)
	}
	running := cmdutil.MeshRunning(proj)
	if running {
		line(true, "broker", "running · "+proj.PidFile())
	} else {
		line(false, "broker", "not running · start: cotal up --detach")
	}
	mesh, err := proj.ReadMesh()
	switch {
	case errors.Is(err, workspace.ErrNoMesh):
		line(false, "mesh", "none recorded · start: cotal up --detach")
	case err != nil:
		fmt.Fprintf(out, "✗ %-11s %v\n", "mesh", err)
	case running:
		line(true, "mesh", fmt.Sprintf("%s · spaces %s · %s", mesh.Server, strings.Join(mesh.Spaces, ", "), mesh.Mode))
	default:
		line(false, "mesh", mesh.Server+" recorded, down · start: cotal up --detach")
	}
	lf, err := (&extension.Prefix{Dir: filepath.Join(config, "extensions")}).ReadLockfile()
	if err != nil {
		fmt.Fprintf(out, "✗ %-11s %v\n", "extensions", err)
		return nil
	}
	first := 0
	for _, r := range lf.Extensions {
		if r.FirstParty {
			first++
		}
	}
	if len(lf.Extensions) == 0 {
		line(false, "extensions", "none · add: cotal ext add <path>")
	} else {
		line(true, "extensions", fmt.Sprintf("%d installed (%d first-party) · list: cotal ext list", len(lf.Extensions), first))
	}
	return nil
}
