// Package send implements `cotal send`: one-shot messages from the command line.
package send

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Mode is what a send addresses.
type Mode string

// Send modes.
const (
	ModeMsg Mode = "msg" // multicast to a channel
	ModeDM  Mode = "dm"  // unicast to a peer by name
	ModeAsk Mode = "ask" // anycast to a role
)

// Options are the arguments and flags of `cotal send`.
type Options struct {
	IO      *iostreams.IOStreams
	Factory *cmdutil.Factory

	Mesh    cmdutil.MeshFlags
	Mode    Mode
	To      string // channel, peer name or role
	Text    string
	Name    string // sender display name
	Actor   string // sender actor
	ReplyTo string
}

// NewCmdSend builds `cotal send` and its three subcommands.
// runF, when set, replaces the work of each subcommand (tests capture Options with it).
func NewCmdSend(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "send <msg|dm|ask> <to> <text>",
		Short: "Send one message and exit",
		Long: `Send one message as the person at the keyboard (<login>@<host>) and exit.

A DM reports the sequence the broker stored it at and the recipient's state at send time;
it never claims delivery, which happens when the recipient reads it.`,
		Example: `  cotal send msg general "build is green"
  cotal send dm bob "can you review #12?"
  cotal send ask reviewer "review the auth change"`,
	}
	cmd.AddCommand(
		newCmdMode(f, ModeMsg, "msg <channel> <text>", "Post to a channel (multicast)", `  cotal send msg team.backend "deploying now"`, runF),
		newCmdMode(f, ModeDM, "dm <name> <text>", "Send a direct message to one peer (durable unicast)", `  cotal send dm alice "ping"`, runF),
		newCmdMode(f, ModeAsk, "ask <role> <text>", "Ask whoever holds a role (anycast: exactly one holder gets it)", `  cotal send ask reviewer "please review PR 12"`, runF),
	)
	return cmdutil.Group(cmd)
}

func newCmdMode(f *cmdutil.Factory, mode Mode, use, short, example string, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Factory: f, Mode: mode}
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.To, opts.Text = args[0], strings.Join(args[1:], " ")
			if strings.TrimSpace(opts.Text) == "" {
				return cmdutil.FlagErrorf("the message text is empty")
			}
			switch mode {
			case ModeMsg:
				if err := protocol.CheckConcreteChannel(opts.To); err != nil {
					return cmdutil.FlagErrorf("channel: %v", err)
				}
			case ModeAsk:
				if !protocol.ValidToken(opts.To) {
					return cmdutil.FlagErrorf("role %q: use letters, digits, _ and - only", opts.To)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSend(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.ReplyTo, "reply-to", "", "id of the message this answers")
	return cmd
}

func runSend(ctx context.Context, opts *Options) error {
	target, err := opts.Factory.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.Factory.ConnectPerson(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	d := client.Text(opts.Text)
	d.ReplyTo = opts.ReplyTo
	switch opts.Mode {
	case ModeMsg:
		sent, err := ep.Post(ctx, opts.To, d)
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "→ #%s  stored seq %d  %s\n", opts.To, sent.Seq, cmdutil.OneLine(opts.Text))
	case ModeDM:
		t, err := ep.Resolve(ctx, opts.To)
		if err != nil {
			return err
		}
		sent, err := ep.DM(ctx, t.Principal, d)
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "→ %s  stored seq %d; recipient %s at send; delivery not confirmed  %s\n",
			cmdutil.OneLine(t.Name), sent.Seq, t.State, cmdutil.OneLine(opts.Text))
	case ModeAsk:
		sent, err := ep.Ask(ctx, opts.To, d)
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "→ anycast %s  stored seq %d  %s\n", opts.To, sent.Seq, cmdutil.OneLine(opts.Text))
	}
	return ep.Close()
}
