// Package channels implements `cotal channels`: list the channel registry of a space and
// set a channel's delivery class, replay and texts.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// Limits of the registry's texts (wire-protocol §7.1): longer text is refused, never cut.
const (
	MaxDescription  = 200
	MaxInstructions = 2000
)

// NewCmdChannels builds `cotal channels` with list and set.
func NewCmdChannels(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "channels <list|set>",
		Short: "List the channels of a space, or set one's delivery class and replay",
		Long: `The channel registry of a space says, per channel, its delivery class (durable: backed by
the delivery daemon, so a member gets every post it missed; live: at most once, read while
joined), whether joining replays history and how far back, and a description and
instructions shown to agents. Channels without an entry take the space defaults.`,
		Example: `  cotal channels list
  cotal channels set general --durable --replay --window 24h --desc "everyone"`,
	}
	cmd.AddCommand(newCmdList(f, runF), newCmdSet(f, runF))
	return cmdutil.Group(cmd)
}

// Options are the arguments and flags of `cotal channels list` and `cotal channels set`.
type Options struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh cmdutil.MeshFlags
	Set  bool // set, not list
	JSON bool // list

	Name         string
	Class        string // "", provision.ClassDurable or provision.ClassLive
	Replay       *bool
	Window       *string
	Description  *string
	Instructions *string
}

func newCmdList(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:     "list [--json]",
		Short:   "List the channels: class, replay, messages, description",
		Example: `  cotal channels list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func newCmdSet(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Set: true}
	var durable, live, replay, noReplay bool
	var window, desc, instr string
	cmd := &cobra.Command{
		Use:   "set <name> [--durable|--live] [--replay|--no-replay] [--window W] [--desc D] [--instructions I]",
		Short: "Set a channel's registry entry (only the flags given change)",
		Long: `Set a channel's registry entry; flags not given keep their value. The name ` + protocol.ChannelDefaultsKey + `
sets the space defaults (class, replay and window only).`,
		Example: `  cotal channels set general --durable --desc 'the whole team'
  cotal channels set chatter --live --no-replay
  cotal channels set incidents --replay --window 7d`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			fl := cmd.Flags()
			switch {
			case durable && live:
				return cmdutil.FlagErrorf("--durable and --live: pick one")
			case durable:
				opts.Class = provision.ClassDurable
			case live:
				opts.Class = provision.ClassLive
			}
			switch {
			case replay && noReplay:
				return cmdutil.FlagErrorf("--replay and --no-replay: pick one")
			case replay, noReplay:
				v := replay
				opts.Replay = &v
			}
			if fl.Changed("window") {
				opts.Window = &window
			}
			if fl.Changed("desc") {
				opts.Description = &desc
			}
			if fl.Changed("instructions") {
				opts.Instructions = &instr
			}
			if err := opts.check(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSet(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.ValidArgsFunction = cmdutil.Complete(0, f.ChannelNames(&opts.Mesh))
	fl := cmd.Flags()
	fl.BoolVar(&durable, "durable", false, "durable: every member gets every post, also those it missed")
	fl.BoolVar(&live, "live", false, "live: members read posts while joined (at most once)")
	fl.BoolVar(&replay, "replay", false, "joining replays the channel's history")
	fl.BoolVar(&noReplay, "no-replay", false, "joining does not replay history")
	fl.StringVar(&window, "window", "", "how far back a replay reaches, e.g. 30m, 12h, 7d (empty: all)")
	fl.StringVar(&desc, "desc", "", fmt.Sprintf("one line about the channel (at most %d characters)", MaxDescription))
	fl.StringVar(&instr, "instructions", "", fmt.Sprintf("what agents on the channel should do (at most %d characters)", MaxInstructions))
	return cmd
}

// check validates the set flags without I/O.
func (o *Options) check() error {
	if o.Name == protocol.ChannelDefaultsKey {
		if o.Description != nil || o.Instructions != nil {
			return cmdutil.FlagErrorf("%s takes no --desc or --instructions: they belong to one channel", protocol.ChannelDefaultsKey)
		}
	} else if err := protocol.CheckConcreteChannel(o.Name); err != nil {
		return cmdutil.FlagErrorf("channel: %v", err)
	}
	if o.Window != nil && *o.Window != "" {
		if _, err := protocol.ParseReplayWindow(*o.Window); errors.Is(err, protocol.ErrZeroReplayWindow) {
			return cmdutil.FlagErrorf("--window %q: a window of 0 replays nothing: give --no-replay to turn replay off", *o.Window)
		} else if err != nil {
			return cmdutil.FlagErrorf("--window %q: %v", *o.Window, err)
		}
	}
	if o.Description != nil {
		if n := utf8.RuneCountInString(*o.Description); n > MaxDescription {
			return cmdutil.FlagErrorf("--desc is %d characters, over the limit of %d; it is refused, not cut", n, MaxDescription)
		}
	}
	if o.Instructions != nil {
		if n := utf8.RuneCountInString(*o.Instructions); n > MaxInstructions {
			return cmdutil.FlagErrorf("--instructions is %d characters, over the limit of %d; it is refused, not cut", n, MaxInstructions)
		}
	}
	if o.Class == "" && o.Replay == nil && o.Window == nil && o.Description == nil && o.Instructions == nil {
		return cmdutil.FlagErrorf("nothing to set: give --durable or --live, --replay or --no-replay, --window, --desc or --instructions")
	}
	return nil
}

// Entry is one channel as `cotal channels list --json` prints it.
type Entry struct {
	Name         string `json:"name"`
	Class        string `json:"class"` // effective
	Replay       bool   `json:"replay"`
	ReplayWindow string `json:"replayWindow,omitempty"`
	Messages     uint64 `json:"messages"`
	Description  string `json:"description,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	Registered   bool   `json:"registered"` // it has its own registry entry
}

// ListReport is what `cotal channels list --json` prints.
type ListReport struct {
	Space    string             `json:"space"`
	Defaults provision.Defaults `json:"defaults"`
	Channels []Entry            `json:"channels"`
}

func runList(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileObserver)
	if err != nil {
		return err
	}
	defer ep.Close()
	def, err := provision.ChannelDefaults(ctx, ep.JetStream(), t.Space)
	if err != nil {
		return err
	}
	stats, err := ep.ChannelStats(ctx)
	if err != nil {
		return err
	}
	rep := ListReport{Space: t.Space, Defaults: def, Channels: []Entry{}}
	for _, s := range stats {
		e := Entry{Name: s.Name, Messages: s.Messages, Class: def.EffectiveDeliveryClass(), Replay: def.EffectiveReplay(),
			ReplayWindow: def.ReplayWindow, Description: s.Config.Description, Instructions: s.Config.Instructions,
			Registered: s.Config != (client.ChannelConfig{})}
		if s.Config.DeliveryClass != "" {
			e.Class = s.Config.DeliveryClass
		}
		if s.Config.Replay != nil {
			e.Replay = *s.Config.Replay
		}
		if s.Config.ReplayWindow != "" {
			e.ReplayWindow = s.Config.ReplayWindow
		}
		rep.Channels = append(rep.Channels, e)
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	fmt.Fprintf(out, "space %s; defaults: %s, %s\n", t.Space, def.EffectiveDeliveryClass(), replayText(def.EffectiveReplay(), def.ReplayWindow))
	if len(rep.Channels) == 0 {
		fmt.Fprintln(out, "no channels yet")
	}
	for _, e := range rep.Channels {
		fmt.Fprintf(out, "#%-24s %-8s %-16s %6d %s", cmdutil.OneLine(e.Name), cmdutil.OneLine(e.Class), replayText(e.Replay, e.ReplayWindow), e.Messages, cmdutil.Noun(e.Messages, "message"))
		if e.Description != "" {
			pad := "  "
			if e.Messages == 1 {
				pad = "   " // "message" is one letter short of "messages": keep the column
			}
			fmt.Fprintf(out, "%s%s", pad, cmdutil.OneLine(e.Description))
		}
		fmt.Fprintln(out)
	}
	return nil
}

func replayText(on bool, window string) string {
	switch {
	case !on:
		return "no replay"
	case window != "":
		return "replay " + window
	}
	return "replay"
}

func runSet(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, t, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	bucket := protocol.BucketChannels(t.Space)
	kv, err := ep.JetStream().KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("channel registry %s: %w", bucket, err)
	}
	var cur client.ChannelConfig
	var rev uint64
	e, err := kv.Get(ctx, opts.Name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read channel %s: %w", opts.Name, err)
	default:
		rev = e.Revision()
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return cmdutil.Refuse("a change to channel "+opts.Name, "its registry entry does not decode ("+err.Error()+
				"), and a change would drop what it holds; read it with the nats CLI: nats kv get "+bucket+" "+opts.Name, "")
		}
	}
	if opts.Class != "" {
		cur.DeliveryClass = opts.Class
	}
	if opts.Replay != nil {
		cur.Replay = opts.Replay
	}
	if opts.Window != nil {
		cur.ReplayWindow = *opts.Window
	}
	if opts.Description != nil {
		cur.Description = *opts.Description
	}
	if opts.Instructions != nil {
		cur.Instructions = *opts.Instructions
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return fmt.Errorf("encode channel %s: %w", opts.Name, err)
	}
	if rev == 0 {
		_, err = kv.Create(ctx, opts.Name, b)
	} else {
		_, err = kv.Update(ctx, opts.Name, b, rev)
	}
	if err != nil {
		return fmt.Errorf("write channel %s (changed by someone else meanwhile? run it again): %w", opts.Name, err)
	}
	def := provision.Defaults{DeliveryClass: cur.DeliveryClass, Replay: cur.Replay, ReplayWindow: cur.ReplayWindow}
	if opts.Name != protocol.ChannelDefaultsKey {
		if d, err := provision.ChannelDefaults(ctx, ep.JetStream(), t.Space); err == nil {
			if def.DeliveryClass == "" {
				def.DeliveryClass = d.DeliveryClass
			}
			if def.Replay == nil {
				def.Replay = d.Replay
			}
			if def.ReplayWindow == "" {
				def.ReplayWindow = d.ReplayWindow
			}
		}
	}
	label := "#" + opts.Name
	if opts.Name == protocol.ChannelDefaultsKey {
		label = "defaults of space " + t.Space
	}
	fmt.Fprintf(opts.IO.Out, "✓ %s: %s, %s\n", label, def.EffectiveDeliveryClass(), replayText(def.EffectiveReplay(), def.ReplayWindow))
	return nil
}
