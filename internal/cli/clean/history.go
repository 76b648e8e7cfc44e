package clean

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// HistoryReport is what `cotal clean history --json` prints.
type HistoryReport struct {
	Space    string       `json:"space"`
	DryRun   bool         `json:"dryRun"`
	Purged   bool         `json:"purged"` // false on a dry run, or when there was nothing
	Channels []ChannelRow `json:"channels"`
	DMs      *uint64      `json:"dms,omitempty"` // with --dms: the direct messages
	Messages uint64       `json:"messages"`      // the total
	Online   []string     `json:"onlineAgents"`  // agents connected when it ran
}

// ChannelRow is one channel's share of the purge.
type ChannelRow struct {
	Name     string `json:"name"`
	Messages uint64 `json:"messages"`
}

// again is the command as typed, with extra flags: for the lines that repeat it.
func (o *Options) again(extra string) string {
	s := o.Command
	if o.StoreDir != "" {
		s += " --store-dir " + cmdutil.ShellQuote(o.StoreDir)
	}
	if o.Mesh.Space != "" {
		s += " --space " + o.Mesh.Space
	}
	if o.Channel != "" {
		s += " --channel " + o.Channel
	}
	if o.DMs {
		s += " --dms"
	}
	return s + extra
}

func runHistory(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner) // purge is the account owner's
	if err != nil {
		return err
	}
	defer ep.Close()
	space := ep.Space()
	rep := HistoryReport{Space: space, DryRun: opts.DryRun, Channels: []ChannelRow{}, Online: []string{}}
	peers, err := ep.Roster(ctx)
	if err != nil {
		return fmt.Errorf("clean history of space %q: presence: %w", space, err)
	}
	for _, p := range peers {
		if p.Online && p.Card.Kind == protocol.CardAgent {
			rep.Online = append(rep.Online, p.Card.Name)
		}
	}
	sort.Strings(rep.Online)
	js := ep.JetStream()
	chatFilter := protocol.ChatAll(space)
	if opts.Channel != "" {
		chatFilter = protocol.ChannelFilter(space, opts.Channel)
	}
	var chatLast, dmLast uint64
	if rep.Channels, chatLast, err = channelCounts(ctx, js, space, chatFilter); err != nil {
		return err
	}
	for _, c := range rep.Channels {
		rep.Messages += c.Messages
	}
	if opts.Channel != "" && len(rep.Channels) == 0 {
		rep.Channels = []ChannelRow{{Name: opts.Channel}}
	}
	if opts.DMs {
		var n uint64
		n, dmLast, err = streamCount(ctx, js, space, protocol.StreamDM(space), protocol.InstAll(space))
		if err != nil {
			return err
		}
		rep.DMs = &n
		rep.Messages += n
	}
	if opts.DryRun {
		return opts.showHistory(rep)
	}
	if rep.Messages == 0 {
		return opts.showHistory(rep)
	}
	if len(rep.Online) > 0 && !opts.Force {
		return cmdutil.Refuse(fmt.Sprintf("to clear the history of space %q", space),
			fmt.Sprintf("%s connected (%s): they would lose history they may read again; stop them first, or add --force to purge anyway",
				cmdutil.Count(len(rep.Online), "agent is", "agents are"), termsafe.Escape(strings.Join(rep.Online, ", "))),
			"cotal status")
	}
	if err := opts.confirm(opts.historyWhat(rep)); err != nil {
		return err
	}
	if err := purge(ctx, js, space, protocol.StreamChat(space), chatFilter, chatLast); err != nil {
		return err
	}
	if opts.DMs {
		if err := purge(ctx, js, space, protocol.StreamDM(space), protocol.InstAll(space), dmLast); err != nil {
			return err
		}
	}
	rep.Purged = true
	return opts.showHistory(rep)
}

// historyWhat names what a purge deletes, for the prompt.
func (o *Options) historyWhat(rep HistoryReport) string {
	what := cmdutil.Count(rep.Messages, "message")
	switch {
	case o.Channel != "":
		what += " of #" + o.Channel
	default:
		what += " of every channel"
	}
	if o.DMs {
		what += " and the direct messages"
	}
	return what + " in space " + rep.Space
}

func (o *Options) showHistory(rep HistoryReport) error {
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, rep)
	}
	out := o.IO.Out
	verb := "purged"
	if rep.DryRun {
		verb = "would purge"
	}
	if rep.Messages == 0 {
		fmt.Fprintf(out, "nothing to purge: %s holds no history\n", o.scope(rep.Space))
		return nil
	}
	for _, c := range rep.Channels {
		if c.Messages > 0 || o.Channel != "" {
			fmt.Fprintf(out, "%s #%s: %s\n", verb, termsafe.Escape(c.Name), cmdutil.Count(c.Messages, "message"))
		}
	}
	if rep.DMs != nil {
		fmt.Fprintf(out, "%s direct messages: %s\n", verb, cmdutil.Count(*rep.DMs, "message"))
	}
	if rep.DryRun {
		fmt.Fprintf(out, "dry run: %s of space %s would go; nothing was deleted\n", cmdutil.Count(rep.Messages, "message"), rep.Space)
		if len(rep.Online) > 0 {
			fmt.Fprintf(out, "! %s connected (%s): a real run is refused without --force\n",
				cmdutil.Count(len(rep.Online), "agent is", "agents are"), termsafe.Escape(strings.Join(rep.Online, ", ")))
		}
		return nil
	}
	fmt.Fprintf(out, "✓ purged %s from space %s\n", cmdutil.Count(rep.Messages, "message"), rep.Space)
	return nil
}

// scope names what the purge covers.
func (o *Options) scope(space string) string {
	s := "space " + space
	if o.Channel != "" {
		s = "#" + o.Channel + " of " + s
	}
	if o.DMs {
		s += " (channels and direct messages)"
	}
	return s
}

// channelCounts counts the posts of the chat stream matching filter, by channel, and
// returns the stream's last sequence number when they were counted.
func channelCounts(ctx context.Context, js jetstream.JetStream, space, filter string) ([]ChannelRow, uint64, error) {
	name := protocol.StreamChat(space)
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, 0, streamErr(space, name, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, 0, fmt.Errorf("clean history of space %q: stream %s: %w", space, name, err)
	}
	by := map[string]uint64{}
	for subject, n := range info.State.Subjects {
		if sub, err := protocol.ParseSubject(subject); err == nil && sub.Kind == protocol.KindChat {
			by[sub.Channel] += n
		}
	}
	rows := make([]ChannelRow, 0, len(by))
	for name, n := range by {
		rows = append(rows, ChannelRow{Name: name, Messages: n})
	}
	slices.SortFunc(rows, func(a, b ChannelRow) int { return strings.Compare(a.Name, b.Name) })
	return rows, info.State.LastSeq, nil
}

// streamCount counts the messages of stream on subjects matching filter, and returns the
// stream's last sequence number when they were counted.
func streamCount(ctx context.Context, js jetstream.JetStream, space, name, filter string) (uint64, uint64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, 0, streamErr(space, name, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, 0, fmt.Errorf("clean history of space %q: stream %s: %w", space, name, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, info.State.LastSeq, nil
}

// purge removes the messages of stream on subjects matching filter up to sequence last,
// the ones counted and confirmed: a message stored since stays.
func purge(ctx context.Context, js jetstream.JetStream, space, name, filter string, last uint64) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return streamErr(space, name, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter), jetstream.WithPurgeSequence(last+1)); err != nil {
		return fmt.Errorf("clean history of space %q: purge stream %s (%s): %w", space, name, filter, err)
	}
	return nil
}

// streamErr says what a stream lookup of space's stream name failed with.
func streamErr(space, name string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return cmdutil.WithNext(fmt.Errorf("clean history of space %q: stream %s not found: the space was never provisioned on this mesh", space, name),
			"cotal up --space "+space)
	}
	return fmt.Errorf("clean history of space %q: stream %s: %w", space, name, err)
}
