package peers

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/trust"
)

// RmOptions are the flags of `cotal a2a rm`.
type RmOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh cmdutil.MeshFlags
	Name string
}

// NewCmdRm builds `cotal a2a rm`.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *RmOptions) error) *cobra.Command {
	opts := &RmOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove an external A2A agent from the space",
		Long: `Remove the registration of an external A2A agent (cotal a2a add) and the token kept for
it. A running bridge (cotal a2a) leaves the space as that peer at once; DMs already
stored for it stay in its DM durable, and reach it if it is registered again. Tasks it
had accepted and not answered are dropped (their askers get no answer from it), so an
agent added later under the same name never answers for them.`,
		Example: `  cotal a2a rm support
  cotal a2a rm planner --space review`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := a2apeer.CheckName(opts.Name); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRm(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	return cmd
}

func runRm(ctx context.Context, opts *RmOptions) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	dropped, err := (&a2apeer.Store{JS: ep.JetStream(), Space: target.Space}).Delete(ctx, opts.Name)
	if errors.Is(err, a2apeer.ErrNotFound) {
		return cmdutil.Refuse("a2a rm "+opts.Name, "no A2A peer of that name is registered on space "+target.Space, "cotal a2a ls")
	}
	if err != nil {
		return err
	}
	if target.Project != nil {
		if err := removeToken(target.Project, target.Space, opts.Name); err != nil {
			return err
		}
	}
	fmt.Fprintf(opts.IO.Out, "removed %s from space %s\n", opts.Name, target.Space)
	if dropped > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "dropped %d task(s) it had accepted and not answered: their askers get no answer from it\n", dropped)
	}
	return nil
}
