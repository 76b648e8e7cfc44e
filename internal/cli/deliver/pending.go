package deliver

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// PendingOptions are the arguments and flags of `cotal deliver pending`.
type PendingOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc // reads the DM and hand-off durables as the provisioner

	Mesh  cmdutil.MeshFlags
	Name  string
	Limit int
	JSON  bool
}

// PendingReport is what `cotal deliver pending --json` prints.
type PendingReport struct {
	Name      string          `json:"name"`
	Principal string          `json:"principal"`
	State     string          `json:"state"`
	Durables  []delivery.Held `json:"durables"`
}

// NewCmdPending builds `cotal deliver pending`.
func NewCmdPending(f *cmdutil.Factory, runF func(context.Context, *PendingOptions) error) *cobra.Command {
	opts := &PendingOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "pending <name> [--json]",
		Short: "Show the messages one recipient has not read yet (read-only)",
		Long: `Show what waits for one recipient: its DM durables and its durable channel hand-off,
with the number of messages not yet delivered and delivered but not acked, and the first
of them. Read-only: nothing is acked, created or started.`,
		Example: `  cotal deliver pending bob
  cotal deliver pending bob --json --limit 50`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cmdutil.OneName(args, opts.Name)
			if err != nil {
				return err
			}
			if name == "" {
				return cmdutil.FlagErrorf("no recipient named: give its name as the argument (cotal deliver pending bob) or with --name")
			}
			if err := protocol.CheckDisplayName(name); err != nil {
				return cmdutil.FlagErrorf("recipient %v", err)
			}
			opts.Name = name
			if opts.Limit < 0 {
				return cmdutil.FlagErrorf("--limit %d: want 0 or more", opts.Limit)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runPending(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "the recipient (the same as the argument)")
	cmd.ValidArgsFunction = cmdutil.Complete(0, f.PeerNames(&opts.Mesh))
	_ = cmd.RegisterFlagCompletionFunc("name", cmdutil.Complete(-1, f.PeerNames(&opts.Mesh)))
	cmd.Flags().IntVar(&opts.Limit, "limit", 20, "messages to show per durable")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runPending(ctx context.Context, opts *PendingOptions) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	target, err := ep.Resolve(ctx, opts.Name)
	if err != nil {
		return err
	}
	held, err := delivery.Pending(ctx, ep.JetStream(), t.Space, target.Principal, opts.Limit)
	if err != nil {
		return err
	}
	rep := PendingReport{Name: target.Name, Principal: target.Principal.String(), State: string(target.State), Durables: held}
	if rep.Durables == nil {
		rep.Durables = []delivery.Held{}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	fmt.Fprintf(out, "%s (%s, %s)\n", cmdutil.OneLine(rep.Name), rep.Principal, rep.State)
	if len(held) == 0 {
		fmt.Fprintln(out, "  no durables")
	}
	for _, h := range held {
		fmt.Fprintf(out, "  %s on %s: %d waiting, %d delivered unacked\n", h.Name, h.Stream, h.Waiting, h.Unacked)
		for _, m := range h.Messages {
			where := "dm"
			if h.Kind == "channel" {
				where = "#" + cmdutil.OneLine(m.Channel)
			}
			fmt.Fprintf(out, "    seq %-6d [%s] %s: %s\n", m.Seq, where, cmdutil.OneLine(m.Name), cmdutil.OneLine(m.Text))
		}
	}
	return nil
}
