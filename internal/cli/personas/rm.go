package personas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/workspace"
)

// RmOptions are the flags of `cotal personas rm`.
type RmOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string
	Name   string
	Force  bool
}

// NewCmdRm builds `cotal personas rm`.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *RmOptions) error) *cobra.Command {
	opts := &RmOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "rm <name> --force",
		Short: "Delete a persona file",
		Long: `Delete .cotal/agents/<name>.md, valid or not. It cannot be undone, so it needs --force;
without it rm only says what it would delete. Agents already running keep their
credentials; the persona is no longer offered for new ones.`,
		Example: `  cotal personas rm dave --force`,
		Aliases: []string{"remove"},
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := personaName(args, opts.Name, "rm")
			if err != nil {
				return err
			}
			opts.Name = name
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRm(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the persona's name (the same as the argument)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "really delete the file")
	return cmd
}

func runRm(_ context.Context, opts *RmOptions) error {
	proj, wd, err := findProject(opts.Getwd, opts.Getenv)
	if err != nil {
		return err
	}
	if proj == nil {
		return noProject("rm", opts.Name, wd)
	}
	path := proj.PersonaPath(opts.Name)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return noPersona("rm", opts.Name, proj)
	} else if err != nil {
		return fmt.Errorf("rm persona %q: %w", opts.Name, err)
	}
	if !opts.Force {
		return cmdutil.Refuse(fmt.Sprintf("rm persona %q without --force", opts.Name),
			"it deletes "+path+" and cannot be undone", "cotal personas rm "+opts.Name+" --force")
	}
	if err := proj.RemovePersona(opts.Name); err != nil {
		if errors.Is(err, workspace.ErrNoPersona) {
			return noPersona("rm", opts.Name, proj)
		}
		return err
	}
	fmt.Fprintf(opts.IO.Out, "removed persona %s: %s\n", opts.Name, path)
	return nil
}
