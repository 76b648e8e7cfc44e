// Package send implements `cotal send`: one-shot messages from the command line.
package send

import (
	"context"
	"errors"
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
	IO            *iostreams.IOStreams
	Resolve       cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectPerson cmdutil.ConnectAsFunc

	Mesh    cmdutil.MeshFlags
	Mode    Mode
	To      string // channel, peer name or role
	Text    string
	Name    string // sender display name
	Actor   string // sender actor
	ReplyTo string
	ID      string // message id; "" means a fresh one
	JSON    bool   // --json: print the Result as one JSON document
}

// Result is what `cotal send --json` prints: where the message went and where the broker
// stored it.
type Result struct {
	Mode      Mode   `json:"mode"`
	To        string `json:"to"`
	Peer      string `json:"peer,omitempty"`  // dm: the recipient's principal
	State     string `json:"state,omitempty"` // dm: the recipient's state at send, never a delivery claim
	ID        string `json:"id"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"` // a retry: the broker already held this id
}

// NewCmdSend builds `cotal send` and its three subcommands.
// runF, when set, replaces the work of each subcommand (tests capture Options with it).
func NewCmdSend(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "send <msg|dm|ask> <to> <text>",
		Short: "Send one message and exit",
		Long: `Send one message as the person at the keyboard (<login>@<host>) and exit.

A DM reports the sequence the broker stored it at and the recipient's state at send time;
it never claims delivery, which happens when the recipient reads it.

A send whose outcome is unknown (a timeout, a broker restarting) is retried with the same
message id, so the broker stores it once. If the command still fails, it prints the
command to run again with --id: within 2 minutes that retry is stored at most once too.`,
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
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectPerson: f.ConnectPerson, Mode: mode}
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
			case ModeDM:
				if err := protocol.CheckDisplayName(opts.To); err != nil {
					return cmdutil.FlagErrorf("peer %v", err)
				}
			case ModeAsk:
				if err := protocol.CheckRole(opts.To); err != nil {
					return cmdutil.FlagErrorf("%v", err)
				}
			}
			if err := client.CheckID(opts.ID); err != nil {
				return cmdutil.FlagErrorf("--id: %v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSend(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	names := map[Mode]func(*cmdutil.MeshFlags) func(context.Context) ([]string, error){
		ModeMsg: f.ChannelNames, ModeDM: f.PeerNames, ModeAsk: f.RoleNames}[mode]
	cmd.ValidArgsFunction = cmdutil.Complete(0, names(&opts.Mesh))
	cmd.Flags().StringVar(&opts.ReplyTo, "reply-to", "", "id of the message this answers")
	cmd.Flags().StringVar(&opts.ID, "id", "", "message id, to retry a send that failed (the failure prints it); default a fresh one")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result as one JSON document")
	return cmd
}

func runSend(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectPerson(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	d := client.Text(opts.Text)
	d.ReplyTo = opts.ReplyTo
	d.ID = opts.ID
	if d.ID == "" {
		d.ID = client.NewID()
	}
	stored := func(sent client.Sent) string {
		if sent.Duplicate {
			return fmt.Sprintf("already stored at seq %d (id %s: this retry stored nothing new)", sent.Seq, sent.ID)
		}
		return fmt.Sprintf("stored seq %d", sent.Seq)
	}
	switch opts.Mode {
	case ModeMsg:
		sent, err := ep.Post(ctx, opts.To, d)
		if err != nil {
			return retryable(opts, d.ID, err)
		}
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, Result{Mode: opts.Mode, To: opts.To, ID: sent.ID, Stream: sent.Stream, Seq: sent.Seq, Duplicate: sent.Duplicate})
		}
		fmt.Fprintf(opts.IO.Out, "→ #%s  %s  %s\n", opts.To, stored(sent), cmdutil.OneLine(opts.Text))
	case ModeDM:
		t, err := ep.Resolve(ctx, opts.To)
		if err != nil {
			return err
		}
		sent, err := ep.DM(ctx, t.Principal, d)
		if err != nil {
			return retryable(opts, d.ID, err)
		}
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, Result{Mode: opts.Mode, To: opts.To, Peer: t.Principal.String(), State: string(t.State),
				ID: sent.ID, Stream: sent.Stream, Seq: sent.Seq, Duplicate: sent.Duplicate})
		}
		fmt.Fprintf(opts.IO.Out, "→ %s  %s; recipient %s at send; delivery not confirmed  %s\n",
			cmdutil.OneLine(t.Name), stored(sent), t.State, cmdutil.OneLine(opts.Text))
	case ModeAsk:
		sent, err := ep.Ask(ctx, opts.To, d)
		if err != nil {
			return retryable(opts, d.ID, err)
		}
		if opts.JSON {
			return cmdutil.WriteJSON(opts.IO.Out, Result{Mode: opts.Mode, To: opts.To, ID: sent.ID, Stream: sent.Stream, Seq: sent.Seq, Duplicate: sent.Duplicate})
		}
		fmt.Fprintf(opts.IO.Out, "→ anycast %s  %s  %s\n", opts.To, stored(sent), cmdutil.OneLine(opts.Text))
	}
	return ep.Close()
}

// retryable turns a failed send into a refusal whose next step resends it with the same
// id: the broker may have stored it, and the same id is stored at most once. A refusal
// that stored nothing (bad input, permission, no inbox) is returned as it is.
func retryable(opts *Options, id string, err error) error {
	if errors.Is(err, client.ErrRefused) || errors.Is(err, client.ErrNoInbox) || errors.Is(err, client.ErrUnknownPeer) {
		return err
	}
	args := []string{"cotal", "send", string(opts.Mode), opts.To, opts.Text, "--id", id}
	if opts.ReplyTo != "" {
		args = append(args, "--reply-to", opts.ReplyTo)
	}
	for _, f := range [][2]string{{"--space", opts.Mesh.Space}, {"--server", opts.Mesh.Server}, {"--creds", opts.Mesh.Creds}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	for i, a := range args {
		args[i] = cmdutil.ShellQuote(a)
	}
	return cmdutil.Refuse("to report this send as done", fmt.Sprintf("%v; it may have been stored all the same, so resend it with the same id (within 2 minutes the broker keeps one copy)", err),
		strings.Join(args, " "))
}
