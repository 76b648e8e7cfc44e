package seats

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
)

// StopOptions are the flags of `cotal stop`.
type StopOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	Name            string
	Force           bool
}

// NewCmdStop builds `cotal stop`.
func NewCmdStop(f *cmdutil.Factory, runF func(context.Context, *StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "stop (<name> | --name N) [--force]",
		Short: "Stop an agent the manager runs",
		Long: `Stop one seat of the space's agent manager: its process group gets SIGTERM, then SIGKILL
10 s later if it still runs (--force: SIGKILL at once). Its credential and run files are
removed once it has ended; ps then shows it exited.`,
		Example: `  cotal stop --name coder
  cotal stop --name coder --force
  cotal stop coder           # the same as --name coder`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cmdutil.OneName(args, opts.Name)
			if err != nil {
				return err
			}
			opts.Name = name
			if !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("agent name %q: give the agent to stop as the argument or with --name (see cotal ps)", opts.Name)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runStop(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "the agent to stop")
	completeSeats(cmd, f, &opts.Mesh)
	cmd.Flags().BoolVar(&opts.Force, "force", false, "SIGKILL at once")
	return cmd
}

func runStop(ctx context.Context, opts *StopOptions) error {
	c, ep, t, err := Dial(ctx, opts.Resolve, opts.ConnectOperator, opts.Mesh)
	if err != nil {
		return err
	}
	defer ep.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var s protocol.SeatInfo
	if err := c.Call(cctx, protocol.MgrStop, protocol.NameArgs{Name: opts.Name, Force: opts.Force}, &s); err != nil {
		return Explain(err, t.Space)
	}
	fmt.Fprintf(opts.IO.Out, "✓ stopped %s (%s); its credential is removed\n", esc(s.Name), Process(s, time.Now()))
	return nil
}
