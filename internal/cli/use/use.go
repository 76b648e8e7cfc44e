// Package use implements `cotal use`: the default space (a space of this project's mesh,
// or a registered remote mesh) later commands address when given neither --space nor
// --server.
package use

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal use`.
type Options struct {
	IO *iostreams.IOStreams
	// Home is the machine home (cmdutil.Factory.MachineHome), where the default is kept;
	// only run calls it.
	Home func() (string, error)
	// Project is the project found from the current folder; nil and no error outside one.
	Project func() (*workspace.Project, error)
	// Reachable tells whether a space is served by the project's mesh or registered.
	Reachable func(*workspace.Project, string) (cmdutil.Reach, error)
	Space     string // the space to make the default; "" shows the current default
	Clear     bool
	JSON      bool
}

// Current is what `cotal use --json` prints.
type Current struct {
	Space string `json:"space"` // the recorded default; "" when none
	File  string `json:"file"`  // where it is kept
	// Applies tells whether commands here address it: the project's mesh serves it or it
	// is a registered remote mesh; otherwise they use the project's own space.
	Applies bool   `json:"applies"`
	Via     string `json:"via,omitempty"` // "project" or "remote", with Applies
}

// NewCmdUse builds `cotal use`.
func NewCmdUse(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Home: f.MachineHome, Reachable: f.Reachable,
		Project: func() (*workspace.Project, error) {
			wd, err := f.Getwd()
			if err != nil {
				return nil, err
			}
			p, err := workspace.FindProject(wd, f.Getenv)
			if errors.Is(err, workspace.ErrNoProject) {
				return nil, nil
			}
			return p, err
		}}
	cmd := &cobra.Command{
		Use:   "use [<space> | --clear] [--json]",
		Short: "Set or show the default space later commands address",
		Long: `Make <space> the default of commands run without --space and --server (status, send,
console, channels, tasks, spawn, ...): a space this project's running mesh serves (cotal up
--space adds one), or a remote mesh registered with cotal meshes add. The default is kept
for this user in <machine home>/current-mesh ($COTAL_HOME, else ~/.cotal), as the
reference keeps it.

A command finds its space in this order: --space (and --server); else the default set
here, when the project's mesh serves it or it is a registered remote mesh; else the
project's own space. A default that is not reachable from the current folder is passed
over, never an error: cotal use alone says whether it applies here.

cotal use alone shows the default; --clear forgets it.`,
		Example: `  cotal use review        # later commands address the space review
  cotal use               # show the default and whether it applies here
  cotal use --json
  cotal use --clear       # back to the project's own space`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Space = args[0]
				if err := protocol.CheckSpace(opts.Space); err != nil {
					return cmdutil.FlagErrorf("<space>: %v", err)
				}
			}
			if opts.Clear && opts.Space != "" {
				return cmdutil.FlagErrorf("--clear takes no space: run cotal use --clear, or cotal use %s", opts.Space)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runUse(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Clear, "clear", false, "forget the default space")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document (the default after the change)")
	return cmd
}

func runUse(_ context.Context, opts *Options) error {
	home, err := opts.Home()
	if err != nil {
		return err
	}
	file := filepath.Join(home, workspace.CurrentMeshFile)
	proj, err := opts.Project()
	if err != nil {
		return err
	}
	switch {
	case opts.Clear:
		was, rerr := workspace.ReadCurrentSpace(home) // a torn file is cleared too
		if err := workspace.ClearCurrentSpace(home); err != nil {
			return err
		}
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, Current{File: file})
		}
		switch {
		case rerr == nil && was != "":
			fmt.Fprintf(opts.IO.Out, "✓ cleared the default space (was %s): commands use the project's space\n", was)
		case rerr != nil:
			fmt.Fprintf(opts.IO.Out, "✓ removed %s\n", file)
		default:
			fmt.Fprintln(opts.IO.Out, "no default space was set")
		}
		return nil
	case opts.Space != "":
		r, err := opts.Reachable(proj, opts.Space)
		if err != nil {
			return err
		}
		if !r.Project && !r.Remote {
			return cmdutil.Refuse(fmt.Sprintf("space %q as the default", opts.Space), notReachable(proj, opts.Space), "cotal up --space "+opts.Space)
		}
		if err := workspace.WriteCurrentSpace(home, opts.Space); err != nil {
			return err
		}
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, current(opts.Space, file, r))
		}
		fmt.Fprintf(opts.IO.Out, "✓ default space is now %s (%s): commands without --space address it\n", opts.Space, via(r))
		fmt.Fprintf(opts.IO.ErrOut, "wrote %s\n", file)
		return nil
	}
	space, err := workspace.ReadCurrentSpace(home)
	if err != nil {
		return err
	}
	var r cmdutil.Reach
	if space != "" {
		if r, err = opts.Reachable(proj, space); err != nil {
			return err
		}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, current(space, file, r))
	}
	switch {
	case space == "":
		fmt.Fprintln(opts.IO.Out, "no default space: commands use the project's space (set one with cotal use <space>)")
	case r.Project || r.Remote:
		fmt.Fprintf(opts.IO.Out, "default space %s (%s)\n", space, via(r))
	default:
		fmt.Fprintf(opts.IO.Out, "default space %s, passed over here: %s; commands use the project's space\n", space, notReachable(proj, space))
	}
	return nil
}

// current is the JSON form of the default space.
func current(space, file string, r cmdutil.Reach) Current {
	c := Current{Space: space, File: file, Applies: r.Project || r.Remote}
	switch {
	case r.Project:
		c.Via = "project"
	case r.Remote:
		c.Via = "remote"
	}
	return c
}

// via says where a reachable space is served.
func via(r cmdutil.Reach) string {
	if r.Project {
		return "served by this project's mesh"
	}
	return "a registered remote mesh"
}

// notReachable says why space cannot be addressed from here.
func notReachable(proj *workspace.Project, space string) string {
	served := "no mesh is running for this folder"
	if proj != nil {
		if m, err := proj.ReadMesh(); err == nil {
			served = "this project's mesh serves " + strings.Join(m.Spaces, ", ")
		}
	}
	return fmt.Sprintf("%s, and no remote mesh of space %s is registered (cotal meshes list)", served, space)
}
