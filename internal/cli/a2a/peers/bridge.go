package peers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// NewBridge builds the bridge of target's space (a2apeer.Bridge; run it with Run): op,
// the project's own identity (Factory.ConnectOperator with the provisioner profile),
// reads the registry for as long as the bridge runs; each agent joins with an agent
// credential of its own on an authenticated mesh (principal local.<name>, no channel,
// its role's durable), minted from the project's keys as `cotal join --persona` mints
// one, and sends the tokens `cotal a2a add --token-file` kept.
func NewBridge(f *cmdutil.Factory, target cmdutil.Target, op *client.Endpoint, log *slog.Logger) *a2apeer.Bridge {
	return &a2apeer.Bridge{
		Space:  target.Space,
		JS:     op.JetStream(),
		Token:  Tokens(target.Project, target.Space),
		Logger: log,
		Connect: func(ctx context.Context, r a2apeer.Registration, cfg client.Config) (*client.Endpoint, error) {
			t := target
			t.Creds, t.CredsData = "", nil
			if t.Auth() {
				creds, err := f.AgentCreds(ctx, t, trust.UserSpec{Name: r.Name, Profile: trust.ProfileAgent,
					Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: r.Name}, Role: r.Role, Subscribe: []string{}})
				if err != nil {
					return nil, err
				}
				t.CredsData = creds
			}
			return f.Connect(ctx, t, cfg, cmdutil.As{})
		},
	}
}

// BridgeOptions are the flags of the bridge run alone (cotal a2a runs it beside the
// gateway).
type BridgeOptions struct {
	IO     *iostreams.IOStreams
	F      *cmdutil.Factory
	Getenv func(string) string
	Mesh   cmdutil.MeshFlags
}

// NewCmdBridge builds the bridge alone, in the foreground until interrupted.
func NewCmdBridge(f *cmdutil.Factory, runF func(context.Context, *BridgeOptions) error) *cobra.Command {
	opts := &BridgeOptions{IO: f.IO, F: f, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Present the registered A2A agents as peers, until interrupted",
		Long: `Join the space as every external A2A agent registered with cotal a2a add, and relay
what they are sent (DMs, and anycasts to their role) to them as A2A messages, and their
answers back as DMs, until interrupted. An agent added or removed meanwhile joins or
leaves at once.`,
		Example: `  cotal a2a bridge
  cotal a2a bridge --space review`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runBridge(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	return cmd
}

func runBridge(ctx context.Context, opts *BridgeOptions) error {
	target, err := opts.F.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	return RunBridge(ctx, opts.F, target, slog.New(cmdutil.NoticeHandler(opts.IO.ErrOut, slog.LevelInfo)), func() {
		fmt.Fprintf(opts.IO.ErrOut, "a2a bridge ready on space %s\n", target.Space)
		if err := cmdutil.SignalReady(opts.Getenv, "a2a bridge "+target.Space); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "! %v\n", err)
		}
	})
}

// RunBridge serves the registered A2A agents of target's space until ctx ends (nil), as
// the project's own identity (see NewBridge); ready (may be nil) is called once the
// registry was read. `cotal a2a` runs it beside the gateway.
func RunBridge(ctx context.Context, f *cmdutil.Factory, target cmdutil.Target, log *slog.Logger, ready func()) error {
	op, err := f.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer op.Close()
	b := NewBridge(f, target, op, log)
	b.Ready = ready
	return b.Run(ctx)
}

// Commands are add, rm, ls and bridge, for `cotal a2a` to add as its subcommands.
func Commands(f *cmdutil.Factory) []*cobra.Command {
	return []*cobra.Command{NewCmdAdd(f, nil), NewCmdRm(f, nil), NewCmdLs(f, nil), NewCmdBridge(f, nil)}
}
