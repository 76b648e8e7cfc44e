// Package join implements `cotal join`: be a peer on a space from a terminal or a script.
package join

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Options are the flags of `cotal join`.
type Options struct {
	IO      *iostreams.IOStreams
	Factory *cmdutil.Factory

	Mesh        cmdutil.MeshFlags
	Name        string
	Role        string
	Channels    []string
	Persona     string
	channelsSet bool // --channel was given
}

// NewCmdJoin builds `cotal join`.
func NewCmdJoin(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "join (--name N [--role R] | --persona P | --creds FILE) [--channel C]...",
		Short: "Join a space as a peer: read lines to post, print what arrives",
		Long: `Join a space as a person or a script. Presence shows you while you are joined.

Who you are: --name (on an authenticated mesh, the project's own identity under that
name); --persona, the agent defined in .cotal/agents/<name>.md, with a credential minted
on the fly from its read and post lists (least privilege); or --creds, a creds file from
cotal mint. A persona or creds file sets the name and role; its subscribe list sets the
channels unless --channel is given.

Every line on stdin is posted to the current channel (the last one joined). Commands:
  /dm <name> <text>        direct message; kept until the peer reads it
  /anycast <role> <text>   ask whoever holds the role (exactly one of them gets it)
  /who                     the roster with each peer's state
  /join <channel>          join a channel (history replays) and make it current
  /leave <channel>         leave a channel
  /working /waiting /idle  set your status
  /quit                    leave (so does the end of stdin)

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
  printf 'hello\n/dm bob ping\n' | cotal join --name script`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.channelsSet = cmd.Flags().Changed("channel")
			switch {
			case opts.Persona != "" && (opts.Name != "" || opts.Role != "" || opts.Mesh.Creds != ""):
				return cmdutil.FlagErrorf("--persona sets the name, role and credential: drop --name, --role and --creds")
			case opts.Mesh.Creds != "" && opts.Name != "":
				return cmdutil.FlagErrorf("--creds names who you are: drop --name")
			case opts.Name == "" && opts.Persona == "" && opts.Mesh.Creds == "":
				return cmdutil.FlagErrorf("--name is required: the name peers see and address you by, e.g. --name alice (or --persona P, or --creds FILE)")
			}
			if opts.Name != "" && !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("--name %q: use 1 to %d letters, digits or _ (no dots, dashes or spaces)", opts.Name, protocol.MaxActorLength)
			}
			if opts.Role != "" && !protocol.ValidToken(opts.Role) {
				return cmdutil.FlagErrorf("--role %q: use letters, digits, _ and - only", opts.Role)
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
	cmd.Flags().StringVar(&opts.Name, "name", "", "your name on the space (required)")
	cmd.Flags().StringVar(&opts.Role, "role", "", "a role to serve: anycasts to it may come to you")
	cmd.Flags().StringArrayVar(&opts.Channels, "channel", []string{"general"}, "channel to join (repeatable)")
	cmd.Flags().StringVar(&opts.Persona, "persona", "", "join as the agent of .cotal/agents/<name>.md")
	return cmd
}

func runJoin(ctx context.Context, opts *Options) error {
	target, err := opts.Factory.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := connect(ctx, opts, &target)
	if err != nil {
		return err
	}
	defer ep.Close()
	if err := ep.Join(ctx, opts.Channels...); err != nil {
		return err
	}
	s := &session{opts: opts, ep: ep, out: opts.IO.Out, errOut: opts.IO.ErrOut}
	if len(opts.Channels) > 0 {
		s.current = opts.Channels[len(opts.Channels)-1]
	}
	fmt.Fprintf(s.errOut, "joined space %s as %s (%s); channels: %s\n", target.Space, ep.Card().Name, ep.Principal(), strings.Join(ep.Channels(), ", "))

	lines := make(chan string)
	go readLines(ctx, opts.IO.In, lines)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ep.Lost():
			return fmt.Errorf("the connection to space %s closed: %v", target.Space, ep.Conn().LastError())
		case in := <-ep.Messages():
			fmt.Fprintln(s.out, cmdutil.MessageLine(in))
			if err := in.Ack(); err != nil {
				fmt.Fprintf(s.errOut, "! ack %s: %v\n", cmdutil.OneLine(in.ID), err)
			}
		case line, ok := <-lines:
			if !ok {
				return ep.Close()
			}
			quit, err := s.handle(ctx, line)
			if err != nil {
				fmt.Fprintf(s.errOut, "✗ %v\n", err)
			}
			if quit {
				return ep.Close()
			}
		}
	}
}

// connect connects as the identity the flags name: a persona (its own least-privilege
// credential on an authenticated mesh), a creds file, or a name.
func connect(ctx context.Context, opts *Options, target *cmdutil.Target) (*client.Endpoint, error) {
	f := opts.Factory
	if opts.Persona == "" {
		return f.Connect(ctx, *target, client.Config{Name: opts.Name, Role: opts.Role},
			cmdutil.As{Profile: trust.ProfileProvisioner, Join: true, Person: true})
	}
	if target.Project == nil {
		return nil, cmdutil.Refuse("--persona outside a project", "personas live in a project's .cotal/agents/", "cotal personas list")
	}
	per, err := target.Project.Persona(opts.Persona)
	if err != nil {
		return nil, err
	}
	if !opts.channelsSet {
		opts.Channels = per.Subscribe
	}
	cfg := client.Config{Name: per.Name, Role: per.Role, Kind: per.Kind, Description: per.Description}
	if !target.Auth() {
		return f.Connect(ctx, *target, cfg, cmdutil.As{})
	}
	creds, err := f.AgentCreds(ctx, *target, trust.UserSpec{Name: per.Name, Profile: trust.ProfileAgent,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: per.Name}, Role: per.Role,
		Subscribe: per.Subscribe, AllowSubscribe: per.ReadACL(), AllowPublish: per.AllowPublish})
	if err != nil {
		return nil, err
	}
	target.CredsData = creds
	return f.Connect(ctx, *target, cfg, cmdutil.As{})
}

// readLines sends each line of r until EOF, then closes lines.
func readLines(ctx context.Context, r io.Reader, lines chan<- string) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-ctx.Done():
			return
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
