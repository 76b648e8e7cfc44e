// Package console implements `cotal console`: on a terminal, a live view of a space
// (roster, feed, channel tabs, needs-you, DMs, tasks, file claims, search, a line to post) over a
// meshview.Model; with --plain or a stdout that is not a terminal, a timestamped stream
// of presence changes and channel messages.
package console

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/trust"
)

// Options are the flags of `cotal console`.
type Options struct {
	IO            *iostreams.IOStreams
	Resolve       cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	Connect       cmdutil.ConnectFunc
	ConnectSender cmdutil.ConnectSenderFunc // the TUI's posts, as the person at the keyboard
	// ConnectOperator reads and answers workflow runs (the TUI's r lens) as the
	// project's own identity; nil leaves the lens saying why.
	ConnectOperator cmdutil.ConnectAsFunc
	Logger          *slog.Logger // nil means discard
	Mesh            cmdutil.MeshFlags
	Plain           bool
	Channel         string
	// ReconnectFor is how long a lost mesh is waited for before console exits non-zero.
	ReconnectFor time.Duration
}

// NewCmdConsole builds `cotal console`.
func NewCmdConsole(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.Connect, ConnectSender: f.ConnectPersonSender, ConnectOperator: f.ConnectOperator, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "console [--plain [--channel PATTERN]]",
		Short: "Watch a space: a terminal UI, or presence changes and messages as timestamped lines",
		Long: `Watch a space without joining it: you do not appear in presence.

On a terminal it shows the roster (state as shape and colour), a live feed with channel tabs
(1-9, [ and ]), the agents waiting for a person (n), direct messages (d, with the admin view
minted on an authenticated mesh), the task board with who holds each task (t), the file
claims with their holders (c), workflow runs and the checkpoints waiting for a person (r;
j and k select one, a types its answer as JSON, Enter files it), search (/, which also
filters t and c) and a line to post to
the current channel as you, with a member's rights only (i, then Enter). q quits.

With --plain, or when stdout is not a terminal, each presence change
(a peer joins, changes status or activity, goes offline) and each channel message prints as
one timestamped line until Ctrl-C. Direct messages and anycasts are private and not shown.
If the mesh goes away, console says so once, reconnects when it returns, and exits
non-zero once it has been gone for --reconnect-for.`,
		Example: `  cotal console --plain
  cotal console --plain --channel 'team.>'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.ReconnectFor <= 0 {
				return cmdutil.FlagErrorf("--reconnect-for %s: want a positive duration, e.g. 1m", opts.ReconnectFor)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if !opts.Plain && opts.IO.IsStdoutTTY() {
				return runTUI(cmd.Context(), opts)
			}
			return runConsole(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.Plain, "plain", false, "print a plain line stream")
	cmd.Flags().StringVar(&opts.Channel, "channel", ">", "channels to watch (a pattern)")
	cmd.Flags().DurationVar(&opts.ReconnectFor, "reconnect-for", time.Minute, "how long to wait for a lost mesh to come back before exiting non-zero")
	_ = cmd.RegisterFlagCompletionFunc("channel", cmdutil.Complete(-1, f.ChannelNames(&opts.Mesh)))
	return cmd
}

func runConsole(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.Connect(ctx, target, client.Config{
		Name: "console", Actor: "console_" + strconv.Itoa(os.Getpid()), Kind: "endpoint", ReconnectFor: opts.ReconnectFor},
		cmdutil.As{Profile: trust.ProfileObserver, Person: true})
	if err != nil {
		return err
	}
	defer ep.Close()
	changes, err := ep.WatchPresence(ctx)
	if err != nil {
		return err
	}
	if err := ep.Listen(ctx, opts.Channel); err != nil {
		return err
	}
	out := opts.IO.Out
	fmt.Fprintf(opts.IO.ErrOut, "watching space %s on %s; Ctrl-C to stop\n", target.Space, target.Server)
	stamp := func() string { return time.Now().Format("2006-01-02 15:04:05") }
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-ep.ConnEvents():
			cmdutil.ConnLine(opts.IO.ErrOut, target.Space, ev, opts.ReconnectFor)
		case <-ep.Lost():
			return fmt.Errorf("the connection to space %s is gone: %w", target.Space, ep.LostErr())
		case c, ok := <-changes:
			if !ok {
				if err := ep.LostErr(); err != nil && ctx.Err() == nil {
					return fmt.Errorf("the connection to space %s is gone: %w", target.Space, err)
				}
				return nil
			}
			fmt.Fprintf(out, "%s %s\n", stamp(), presenceLine(c))
		case in := <-ep.Messages():
			fmt.Fprintf(out, "%s %s\n", stamp(), cmdutil.MessageLine(in))
		}
	}
}

// presenceLine describes one presence change; what the peer wrote is escaped.
func presenceLine(c client.PeerChange) string {
	who := termsafe.Escape(c.Card.Name + " (" + c.Card.ID + ")")
	var line string
	switch {
	case c.Previous == "":
		line = fmt.Sprintf("presence %s is %s", who, c.State())
	case c.Previous != c.State():
		line = fmt.Sprintf("presence %s %s -> %s", who, c.Previous, c.State())
	default:
		line = fmt.Sprintf("presence %s is %s", who, c.State())
	}
	if c.Activity != "" && c.Online {
		line += ` "` + termsafe.Escape(c.Activity) + `"`
	}
	return line
}
