// Package join implements `cotal join`: be a peer on a space from a terminal or a script.
package join

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal join`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Resolve     cmdutil.ResolveFunc
	Connect     cmdutil.ConnectFunc
	AgentCreds  cmdutil.AgentCredsFunc
	MachineHome func() (string, error) // where history cursors go outside a project

	Mesh     cmdutil.MeshFlags
	Name     string
	Role     string
	Channels []string
	Persona  string
	// ReconnectFor is how long a lost mesh is waited for before join exits non-zero.
	ReconnectFor time.Duration
	channelsSet  bool // --channel was given
}

// NewCmdJoin builds `cotal join`.
func NewCmdJoin(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.ChatConnect, AgentCreds: f.AgentCreds, MachineHome: f.MachineHome}
	cmd := &cobra.Command{
		Use:   "join (<name> | --name N [--role R] | --persona P | --creds FILE) [--channel C]...",
		Short: "Join a space as a peer: read lines to post, print what arrives",
		Long: `Join a space as a person or a script. Presence shows you while you are joined.

Who you are, one of: --name, or the name as the argument (on an authenticated mesh, the project's own identity under
that name); --persona, the agent defined in .cotal/agents/<name>.md, with a credential
minted on the fly from its read and post lists (least privilege); or --creds, a creds file
from cotal mint. A persona or creds file sets the name and role (a --name beside --creds
must be the credential's own); its subscribe list sets the channels unless --channel is
given, and a persona that names none joins none (it is DM-only, as every agent that names
no channel is). A person joining by --name or --creds without --channel joins general:
that default is join's own, for people, and no agent credential, persona or spawn ever
implies it; a --creds that may not read general joins no channel and says so. History a channel replays is shown once per identity: a rejoin shows only what
came after.

If the mesh goes away, join says so once, reconnects when it returns, and exits non-zero
once it has been gone for --reconnect-for.

Every line on stdin is posted to the current channel (the last one joined). Commands:
  /dm <name> <text>        direct message; kept until the peer reads it
  /anycast <role> <text>   ask whoever holds the role (exactly one of them gets it)
  /who                     the roster with each peer's state
  /join <channel>          join a channel (history replays) and make it current
  /leave <channel>         leave a channel
  /working /waiting /idle  set your status
  /quit                    leave (so does the end of stdin, once the history joined shows)
A line is one message: a line over 1 MiB is not posted (stderr says so) and the lines
after it are.

Each message that arrives prints as one line on stdout:
  [#<channel>] <sender>: <text>     multicast ([#<channel> history] when replayed)
  [dm] <sender>: <text>             unicast to you
  [anycast <role>] <sender>: <text> a role ask you took
What peers wrote stays on its line: a line break shows as \n, any other control, bidi or
format character as an escape such as \x1b or \u202e.`,
		Example: `  cotal join --name alice --channel general --channel team.backend
  cotal join --persona builder
  cotal join --creds .cotal/auth/creds/space.6d61696e/builder.creds
  cotal join --name reviewer1 --role reviewer
  cotal join alice                     # the same as --name alice
  printf 'hello\n/dm bob ping\n' | cotal join --name script`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cmdutil.OneName(args, opts.Name)
			if err != nil {
				return err
			}
			opts.Name = name
			opts.channelsSet = cmd.Flags().Changed("channel")
			switch {
			case opts.Persona != "" && (opts.Name != "" || opts.Role != "" || opts.Mesh.Creds != ""):
				return cmdutil.FlagErrorf("--persona sets the name, role and credential: drop --name, --role and --creds")
			case opts.Name == "" && opts.Persona == "" && opts.Mesh.Creds == "":
				return cmdutil.FlagErrorf("--name is required: the name peers see and address you by, e.g. --name alice (or --persona P, or --creds FILE)")
			}
			if opts.Name != "" && !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("--name %q: use 1 to %d letters, digits or _ (no dots, dashes or spaces)", opts.Name, protocol.MaxActorLength)
			}
			if opts.Role != "" {
				if err := protocol.CheckRole(opts.Role); err != nil {
					return cmdutil.FlagErrorf("--role: %v", err)
				}
			}
			if opts.ReconnectFor <= 0 {
				return cmdutil.FlagErrorf("--reconnect-for %s: want a positive duration, e.g. 1m", opts.ReconnectFor)
			}
			for _, ch := range opts.Channels {
				if err := protocol.CheckChannelPattern(ch); err != nil {
					return cmdutil.FlagErrorf("--channel: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runJoin(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "your name on the space (required unless --persona or --creds names you)")
	cmd.Flags().StringVar(&opts.Role, "role", "", "a role to serve: anycasts to it may come to you")
	cmd.Flags().StringArrayVar(&opts.Channels, "channel", []string{"general"}, "channel to join (repeatable; a person joins general unless given, a --persona its own subscribe list)")
	cmd.Flags().StringVar(&opts.Persona, "persona", "", "join as the agent of .cotal/agents/<name>.md")
	cmd.Flags().DurationVar(&opts.ReconnectFor, "reconnect-for", time.Minute, "how long to wait for a lost mesh to come back before exiting non-zero")
	_ = cmd.RegisterFlagCompletionFunc("channel", cmdutil.Complete(-1, f.ChannelNames(&opts.Mesh)))
	return cmd
}

func runJoin(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if err := checkCreds(opts, target.Space); err != nil {
		return err
	}
	ep, err := connect(ctx, opts, &target)
	if err != nil {
		return stopped(ctx, err)
	}
	defer ep.Close()
	shownAt, err := shownPath(opts.MachineHome, target, ep.Principal())
	if err != nil {
		return err
	}
	ep.SetShown(loadShown(shownAt, opts.IO.ErrOut))
	warnTwin(ctx, ep, opts.IO.ErrOut)
	if err := ep.Join(ctx, opts.Channels...); err != nil {
		return stopped(ctx, err)
	}
	s := &session{opts: opts, ep: ep, out: opts.IO.Out, errOut: opts.IO.ErrOut}
	if len(opts.Channels) > 0 {
		s.current = opts.Channels[len(opts.Channels)-1]
	}
	joined := strings.Join(ep.Channels(), ", ")
	if joined == "" {
		joined = "none (direct messages only)"
	}
	fmt.Fprintf(s.errOut, "joined space %s as %s (%s); channels: %s\n", target.Space, ep.Card().Name, ep.Principal(), joined)

	lines := make(chan inputLine)
	go readLines(ctx, opts.IO.In, lines)
	loopErr := s.run(ctx, target, lines)
	closeErr := ep.Close()
	if err := saveShown(shownAt, ep.Shown()); err != nil {
		fmt.Fprintf(s.errOut, "! history cursor not saved (the next join shows this history again): %v\n", err)
	}
	switch {
	case loopErr != nil:
		return loopErr
	case ctx.Err() != nil:
		return nil // stopped by a signal: a clean exit
	}
	return closeErr
}

// stopped is nil when a signal ended ctx (the failure is the interruption's), else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// run prints what arrives and handles input lines until the input ends, /quit, ctx ends
// or the mesh is gone for good.
//
// At the end of the input it first waits for the history of the channels joined to be
// shown, so `printf ... | cotal join` prints what it joined before it exits.
func (s *session) run(ctx context.Context, target cmdutil.Target, lines <-chan inputLine) error {
	var replayed chan error // set at the end of input: the history wait's outcome
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-s.ep.ConnEvents():
			cmdutil.ConnLine(s.errOut, target.Space, ev, s.opts.ReconnectFor)
		case <-s.ep.Lost():
			return fmt.Errorf("the connection to space %s is gone: %w", target.Space, s.ep.LostErr())
		case in := <-s.ep.Messages():
			s.show(in)
		case err := <-replayed:
			if err != nil {
				fmt.Fprintf(s.errOut, "! history not all shown: %v\n", err)
			}
			s.drain()
			return nil
		case line, ok := <-lines:
			if !ok {
				lines = nil // the input ended: show the history, then leave
				replayed = make(chan error, 1)
				go func() { replayed <- s.ep.WaitReplayed(ctx) }()
				continue
			}
			if line.err != nil {
				fmt.Fprintf(s.errOut, "✗ %v\n", line.err)
				continue
			}
			quit, err := s.handle(ctx, line.text)
			if err != nil {
				fmt.Fprintf(s.errOut, "✗ %v\n", err)
			}
			if quit {
				return nil
			}
		}
	}
}

// show prints one message that arrived and acknowledges it.
func (s *session) show(in *client.Incoming) {
	fmt.Fprintln(s.out, cmdutil.MessageLine(in))
	if err := in.Ack(); err != nil {
		fmt.Fprintf(s.errOut, "! ack %s: %v\n", cmdutil.OneLine(in.ID), err)
	}
}

// drain shows the messages already waiting, without waiting for more.
func (s *session) drain() {
	for {
		select {
		case in := <-s.ep.Messages():
			s.show(in)
		default:
			return
		}
	}
}

// checkCreds reads --creds, when given: --name beside it must be the credential's own
// actor (one that differs is refused, naming both), and without --channel a credential
// that may not read general joins no channel instead of being refused by the broker.
func checkCreds(opts *Options, space string) error {
	if opts.Mesh.Creds == "" {
		return nil
	}
	b, err := cmdutil.ReadCredsFile("--creds", opts.Mesh.Creds)
	if err != nil {
		return err
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		return fmt.Errorf("--creds %s: %w", opts.Mesh.Creds, err)
	}
	if opts.Name != "" && c.Principal.Actor != "" && c.Principal.Actor != opts.Name {
		return cmdutil.FlagErrorf("--name %s differs from %s, the actor of --creds %s: the credential decides who you are; drop --name", opts.Name, c.Principal.Actor, opts.Mesh.Creds)
	}
	if !opts.channelsSet && !c.MaySubscribe(protocol.ChannelFilter(space, protocol.DefaultChannel)) {
		opts.Channels = nil
		fmt.Fprintf(opts.IO.ErrOut, "note: --creds %s may not read #%s: joining no channel (direct messages still reach you); --channel NAME joins one it may read\n",
			opts.Mesh.Creds, protocol.DefaultChannel)
	}
	return nil
}

// warnTwin warns when another live session is joined as the same principal: it still
// joins, but both share one presence record and one DM durable.
func warnTwin(ctx context.Context, ep *client.Endpoint, w io.Writer) {
	peers, err := ep.Roster(ctx)
	if err != nil {
		return // the join reports a broken space itself
	}
	for _, p := range peers {
		if p.Online && p.Card.ID == ep.Principal().String() {
			session := "another live session"
			if p.LifecycleUID != "" {
				session += " (lifecycle " + termsafe.Escape(p.LifecycleUID) + ")"
			}
			fmt.Fprintf(w, "warning: %s is already joined by %s, %s; you join as the same peer: one presence, and each direct message reaches only one of you\n",
				ep.Principal(), session, p.State())
		}
	}
}

// shownPath is the file keeping how far principal has been shown each channel's history
// on the target's space: in the project's .cotal/, else in the machine home.
func shownPath(machineHome func() (string, error), t cmdutil.Target, p protocol.Principal) (string, error) {
	dir := ""
	if t.Project != nil {
		dir = t.Project.Dir()
	} else {
		home, err := machineHome()
		if err != nil {
			return "", err
		}
		dir = home
	}
	return filepath.Join(dir, "shown", protocol.SpaceKey(t.Space), p.String()+".json"), nil
}

// loadShown reads a history cursor; a missing one is empty, a broken one is reported and
// ignored (the history shows again).
func loadShown(path string, w io.Writer) client.Shown {
	var s client.Shown
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		fmt.Fprintf(w, "! history cursor %s unreadable, showing all history: %v\n", path, err)
		return client.Shown{}
	}
	return s
}

// saveShown writes a history cursor atomically.
func saveShown(path string, s client.Shown) error {
	if len(s.Channels) == 0 {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode history cursor: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("history cursor: %w", err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// connect connects as the identity the flags name: a persona (its own least-privilege
// credential on an authenticated mesh), a creds file, or a name.
func connect(ctx context.Context, opts *Options, target *cmdutil.Target) (*client.Endpoint, error) {
	if opts.Persona == "" {
		return opts.Connect(ctx, *target, client.Config{Name: opts.Name, Role: opts.Role, ReconnectFor: opts.ReconnectFor},
			cmdutil.As{Profile: trust.ProfileProvisioner, Join: true, Person: true})
	}
	if target.Project == nil {
		return nil, cmdutil.Refuse("--persona outside a project", "personas live in a project's .cotal/agents/", "cotal personas list")
	}
	per, err := target.Project.Persona(opts.Persona)
	if errors.Is(err, workspace.ErrNoPersona) {
		return nil, cmdutil.Refuse(fmt.Sprintf("--persona %s", opts.Persona), "there is no "+target.Project.PersonaPath(opts.Persona)+" (cotal personas list shows the project's personas)",
			"cotal personas new "+cmdutil.ShellQuote(opts.Persona)+" --prompt "+cmdutil.ShellQuote(cmdutil.StarterPrompt))
	}
	if err != nil {
		return nil, err
	}
	if !opts.channelsSet {
		opts.Channels = per.BootSet()
	}
	if note := per.DMOnlyNote(); note != "" {
		fmt.Fprintln(opts.IO.ErrOut, note)
	}
	cfg := client.Config{Name: per.Name, Role: per.Role, Kind: per.Kind, Description: per.Description, ReconnectFor: opts.ReconnectFor}
	if !target.Auth() {
		return opts.Connect(ctx, *target, cfg, cmdutil.As{})
	}
	creds, err := opts.AgentCreds(ctx, *target, trust.UserSpec{Name: per.Name, Profile: trust.ProfileAgent,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: per.Name}, Role: per.Role,
		Subscribe: per.Subscribe, AllowSubscribe: per.ReadACL(), AllowPublish: per.AllowPublish})
	if err != nil {
		return nil, err
	}
	target.CredsData = creds
	return opts.Connect(ctx, *target, cfg, cmdutil.As{})
}

// maxLine bounds one input line, in bytes: a line is one message, and a message over the
// broker's 1 MiB payload limit could never be stored.
const maxLine = 1 << 20

// inputLine is one line of input, or why a line was refused.
type inputLine struct {
	text string
	err  error
}

// readLines sends each line of r until EOF, then closes lines. A line over maxLine is
// skipped to its end and reported as an error, and reading goes on with the next line;
// a read error ends the input after it is reported.
func readLines(ctx context.Context, r io.Reader, lines chan<- inputLine) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	send := func(l inputLine) bool {
		select {
		case lines <- l:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for n := 1; ; n++ {
		text, size, err := readLine(br)
		if size > 0 || err == nil {
			l := inputLine{text: text}
			if size > maxLine {
				l = inputLine{err: fmt.Errorf("line %d not posted: it is %d bytes, over the %d-byte limit of one message; split it into shorter lines", n, size, maxLine)}
			}
			if !send(l) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				send(inputLine{err: fmt.Errorf("reading the input: %w", err)})
			}
			return
		}
	}
}

// readLine reads one line without its line ending, keeping at most maxLine bytes of it;
// size is the whole line's length, so a longer line reads to its end and is known to be.
func readLine(br *bufio.Reader) (text string, size int, err error) {
	var buf []byte
	for {
		chunk, isPrefix, rerr := br.ReadLine()
		size += len(chunk)
		if size <= maxLine {
			buf = append(buf, chunk...)
		}
		if rerr != nil {
			return string(buf), size, rerr
		}
		if !isPrefix {
			return string(buf), size, nil
		}
	}
}

// session is the state of one interactive join.
type session struct {
	opts        *Options
	ep          *client.Endpoint
	out, errOut io.Writer
	current     string
}

// handle runs one input line; it reports whether the user asked to quit.
func (s *session) handle(ctx context.Context, line string) (bool, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return false, nil
	}
	if !strings.HasPrefix(line, "/") {
		if s.current == "" {
			return false, errors.New("no current channel to post to; /join <channel> first")
		}
		if err := protocol.CheckConcreteChannel(s.current); err != nil {
			return false, fmt.Errorf("cannot post to %q: /join a concrete channel first", s.current)
		}
		_, err := s.ep.Post(ctx, s.current, client.Text(line))
		return false, err
	}
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch cmd {
	case "/quit", "/exit":
		return true, nil
	case "/who":
		peers, err := s.ep.Roster(ctx)
		if err != nil {
			return false, err
		}
		now := time.Now()
		for _, p := range peers {
			fmt.Fprintln(s.out, "who: "+cmdutil.PeerLine(p, now))
		}
		return false, nil
	case "/dm":
		name, text, ok := cutArg(rest)
		if !ok {
			return false, errors.New("usage: /dm <name> <text>")
		}
		t, err := s.ep.Resolve(ctx, name)
		if err != nil {
			return false, err
		}
		sent, err := s.ep.DM(ctx, t.Principal, client.Text(text))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(s.errOut, "→ %s  stored seq %d; recipient %s at send; delivery not confirmed\n", cmdutil.OneLine(t.Name), sent.Seq, t.State)
		return false, nil
	case "/anycast", "/ask":
		role, text, ok := cutArg(rest)
		if !ok {
			return false, errors.New("usage: /anycast <role> <text>")
		}
		sent, err := s.ep.Ask(ctx, role, client.Text(text))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(s.errOut, "→ anycast %s  stored seq %d\n", role, sent.Seq)
		return false, nil
	case "/join":
		if rest == "" {
			return false, errors.New("usage: /join <channel>")
		}
		if err := s.ep.JoinChannel(ctx, rest); err != nil {
			return false, err
		}
		s.current = rest
		fmt.Fprintf(s.errOut, "joined #%s\n", rest)
		return false, nil
	case "/leave":
		if rest == "" {
			return false, errors.New("usage: /leave <channel>")
		}
		if !slices.Contains(s.ep.Channels(), rest) {
			return false, fmt.Errorf("not in #%s, so nothing to leave; joined: %s", rest, strings.Join(s.ep.Channels(), ", "))
		}
		if err := s.ep.LeaveChannel(rest); err != nil {
			return false, err
		}
		if s.current == rest {
			s.current = ""
			if chs := s.ep.Channels(); len(chs) > 0 {
				s.current = chs[len(chs)-1]
			}
		}
		fmt.Fprintf(s.errOut, "left #%s\n", rest)
		return false, nil
	case "/working", "/waiting", "/idle":
		st := protocol.Status(strings.TrimPrefix(cmd, "/"))
		if err := s.ep.SetStatus(ctx, st); err != nil {
			return false, err
		}
		fmt.Fprintf(s.errOut, "status: %s\n", st)
		return false, nil
	case "/help":
		fmt.Fprintln(s.errOut, "commands: /dm <name> <text>, /anycast <role> <text>, /who, /join <ch>, /leave <ch>, /working, /waiting, /idle, /quit")
		return false, nil
	}
	return false, fmt.Errorf("unknown command %s; /help lists the commands", cmd)
}

// cutArg splits "<word> <text>" and requires both.
func cutArg(s string) (word, text string, ok bool) {
	word, text, _ = strings.Cut(s, " ")
	text = strings.TrimSpace(text)
	return word, text, word != "" && text != ""
}
