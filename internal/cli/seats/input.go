package seats

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
)

// InputOptions are the flags of `cotal input`.
type InputOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	Name            string
	Text            string
	NoEnter         bool
}

// NewCmdInput builds `cotal input`.
func NewCmdInput(f *cmdutil.Factory, runF func(context.Context, *InputOptions) error) *cobra.Command {
	opts := &InputOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "input (<name> | --name N) --text T [--no-enter]",
		Short: "Type one line into an agent's terminal",
		Long: `Type text into the terminal of one seat of the space's agent manager and press Enter
(unless --no-enter), as if at its keyboard. Operator only.`,
		Example: `  cotal input --name coder --text "run the tests again"
  cotal input --name coder --text y --no-enter
  cotal input coder --text y`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cmdutil.OneName(args, opts.Name)
			if err != nil {
				return err
			}
			opts.Name = name
			if !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("agent name %q: give the agent as the argument or with --name (see cotal ps)", opts.Name)
			}
			if opts.Text == "" && opts.NoEnter {
				return cmdutil.FlagErrorf("--text is empty and --no-enter is set: there is nothing to type")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runInput(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "the agent to type into")
	completeSeats(cmd, f, &opts.Mesh)
	cmd.Flags().StringVar(&opts.Text, "text", "", "the text to type")
	cmd.Flags().BoolVar(&opts.NoEnter, "no-enter", false, "do not press Enter after the text")
	return cmd
}

func runInput(ctx context.Context, opts *InputOptions) error {
	c, ep, t, err := Dial(ctx, opts.Resolve, opts.ConnectOperator, opts.Mesh)
	if err != nil {
		return err
	}
	defer ep.Close()
	data := []byte(opts.Text)
	if !opts.NoEnter {
		data = append(data, '\r')
	}
	var res map[string]int
	if err := c.Call(ctx, protocol.MgrInput, protocol.InputArgs{Name: opts.Name, Data: data}, &res); err != nil {
		return Explain(err, t.Space)
	}
	fmt.Fprintf(opts.IO.Out, "✓ sent %d bytes to %s\n", res["bytes"], opts.Name)
	return nil
}
