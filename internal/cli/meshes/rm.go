package meshes

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/meshreg"
	"github.com/cotal-ai/cotal/protocol"
)

// RmOptions are the flags of `cotal meshes rm`.
type RmOptions struct {
	IO    *iostreams.IOStreams
	Dir   func() (string, error) // registry folder; only run calls it
	Space string
}

// NewCmdRm builds `cotal meshes rm`.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *RmOptions) error) *cobra.Command {
	opts := &RmOptions{IO: f.IO, Dir: f.MeshRegistryDir}
	cmd := &cobra.Command{
		Use:   "rm <space>",
		Short: "Forget a registered remote mesh",
		Long: `Delete the registry entry of <space>, valid or not. It only forgets: the mesh keeps
running, and your login sessions stay in <config>/cotal/logins/. Removing is how a
space's pinned public URL changes: rm, then cotal meshes add <space> --from <new URL>.`,
		Example: `  cotal meshes rm team
  cotal meshes rm team && cotal meshes add team --from https://new.example.com`,
		Aliases: []string{"remove"},
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Space = args[0]
			if err := protocol.CheckSpace(opts.Space); err != nil {
				return cmdutil.FlagErrorf("<space>: %v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRm(cmd.Context(), opts)
		},
	}
	return cmd
}

func runRm(_ context.Context, opts *RmOptions) error {
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	err = meshreg.Remove(dir, opts.Space)
	if errors.Is(err, meshreg.ErrNotFound) {
		return cmdutil.Refuse(fmt.Sprintf("rm mesh %q", opts.Space), "no mesh of that space is registered in "+dir, "cotal meshes list")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "removed mesh %s\n", opts.Space)
	return nil
}
