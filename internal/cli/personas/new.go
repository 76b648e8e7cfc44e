package personas

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// NewOptions are the flags of `cotal personas new`.
type NewOptions struct {
	IO          *iostreams.IOStreams
	Getwd       func() (string, error)
	Getenv      func(string) string
	MachineHome func() (string, error) // ~/.cotal or $COTAL_HOME: never made a project

	Name           string
	Prompt         string // --prompt: the prompt text
	From           string // --from: a prompt file, a persona file to copy, or - for stdin
	Role           string
	Model          string
	Subscribe      []string
	AllowSubscribe []string
	AllowPublish   []string
}

// NewCmdNew builds `cotal personas new`.
func NewCmdNew(f *cmdutil.Factory, runF func(context.Context, *NewOptions) error) *cobra.Command {
	opts := &NewOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, MachineHome: f.MachineHome}
	cmd := &cobra.Command{
		Use:   "new <name> (--prompt T | --from FILE) [--role R] [--model M] [--subscribe C]... [--allow-subscribe C]... [--allow-publish C]...",
		Short: "Create a persona file in the project",
		Long: `Create .cotal/agents/<name>.md (0600), creating .cotal/ in the current folder when no
project is found above it. An existing persona is never replaced: remove it first.

The prompt comes from --prompt, or from --from FILE (- reads stdin). A FILE that starts
with a --- line is a persona file: its front matter is copied (the name becomes <name>)
and the flags given here replace its values; any other FILE is the prompt.

Access is least privilege: --subscribe are the channels joined at boot, --allow-subscribe
the read ACL (when omitted, the agent reads exactly what it joins), --allow-publish the post
ACL (when omitted, it posts nowhere). With neither --subscribe nor --allow-subscribe the
agent is DM-only: it joins and reads no channel (general is never implied), and still sends
and receives direct messages, like --subscribe '' (written subscribe: []). Channel patterns may use * for one segment and a
final > for the rest; every boot join must lie within the read ACL.`,
		Example: `  cotal personas new dave --prompt "You build the backend; keep changes small." --role builder \
      --subscribe general --subscribe team.backend \
      --allow-subscribe general --allow-subscribe 'team.>' --allow-publish general
  cotal personas new reviewer --from prompts/reviewer.txt --model opus --subscribe review --allow-publish review
  cotal personas new dave2 --from .cotal/agents/dave.md --role reviewer`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := personaName(args, opts.Name, "new")
			if err != nil {
				return err
			}
			opts.Name = name
			switch {
			case cmd.Flags().Changed("prompt") && opts.Prompt == "":
				return cmdutil.FlagErrorf("--prompt is empty: give the text the agent starts from")
			case opts.Prompt != "" && opts.From != "":
				return cmdutil.FlagErrorf("--prompt and --from both give the prompt: use one")
			case opts.Prompt == "" && opts.From == "":
				return cmdutil.FlagErrorf("a persona needs a prompt: --prompt TEXT or --from FILE")
			}
			if opts.Role != "" {
				if err := protocol.CheckRole(opts.Role); err != nil {
					return cmdutil.FlagErrorf("--role: %v", err)
				}
			}
			if strings.ContainsAny(opts.Model, "\r\n") {
				return cmdutil.FlagErrorf("--model must be one line")
			}
			for _, l := range []struct {
				flag string
				chs  *[]string
			}{{"--subscribe", &opts.Subscribe}, {"--allow-subscribe", &opts.AllowSubscribe}} {
				chs, err := cmdutil.ReadSetFlag(l.flag, *l.chs)
				if err != nil {
					return cmdutil.FlagErrorf("%v", err)
				}
				*l.chs = chs
			}
			for _, l := range []struct {
				flag string
				chs  []string
			}{{"--subscribe", opts.Subscribe}, {"--allow-subscribe", opts.AllowSubscribe}, {"--allow-publish", opts.AllowPublish}} {
				for _, ch := range l.chs {
					if err := protocol.CheckChannelPattern(ch); err != nil {
						return cmdutil.FlagErrorf("%s: %v", l.flag, err)
					}
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runNew(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Name, "name", "", "the persona's name (the same as the argument)")
	fl.StringVar(&opts.Prompt, "prompt", "", "the prompt: the persona's text for the agent")
	fl.StringVar(&opts.From, "from", "", "read the prompt (or a persona to copy) from FILE; - is stdin")
	fl.StringVar(&opts.Role, "role", "", "role: presence label and anycast address")
	fl.StringVar(&opts.Model, "model", "", "model the agent runs")
	fl.StringArrayVar(&opts.Subscribe, "subscribe", nil, "channel joined at boot (repeatable; default none: DM-only)")
	fl.StringArrayVar(&opts.AllowSubscribe, "allow-subscribe", nil, "channel pattern it may read (repeatable; default: its --subscribe, '' for none)")
	fl.StringArrayVar(&opts.AllowPublish, "allow-publish", nil, "channel pattern it may post to (repeatable; default: none)")
	return cmd
}

func runNew(_ context.Context, opts *NewOptions) error {
	per, err := opts.persona()
	if err != nil {
		return err
	}
	what := fmt.Sprintf("new persona %q", opts.Name)
	if out := per.UncoveredSubscribe(); len(out) > 0 {
		fixed := *per
		fixed.AllowSubscribe = append(append([]string(nil), per.AllowSubscribe...), out...)
		return cmdutil.Refuse(what,
			fmt.Sprintf("it would join %s outside its read ACL (allowSubscribe %s): an agent only joins channels it may read",
				strings.Join(out, ", "), strings.Join(per.AllowSubscribe, ", ")),
			opts.commandLine(&fixed))
	}
	if err := per.Validate(); err != nil {
		return cmdutil.Refuse(what, err.Error(), "")
	}
	proj, wd, err := findProject(opts.Getwd, opts.Getenv)
	if err != nil {
		return err
	}
	if proj == nil {
		home, err := opts.MachineHome()
		if err != nil {
			return err
		}
		if filepath.Clean(filepath.Join(wd, workspace.ControlDir)) == filepath.Clean(home) {
			return cmdutil.Refuse(what, filepath.Join(wd, workspace.ControlDir)+" is the machine home (COTAL_HOME), not a project",
				"mkdir -p ~/my-project && cd ~/my-project && "+opts.commandLine(per))
		}
		if proj, err = workspace.Open(wd); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "created %s\n", proj.Dir())
	}
	if err := proj.WritePersona(per); err != nil {
		if errors.Is(err, workspace.ErrPersonaExists) {
			return cmdutil.Refuse(what, proj.PersonaPath(opts.Name)+" exists; new never replaces a persona",
				"cotal personas rm "+opts.Name+" --force")
		}
		return err
	}
	fmt.Fprintf(opts.IO.Out, "created persona %s: %s\n", per.Name, per.Path)
	fmt.Fprintf(opts.IO.Out, "  read: %s  post: %s\n", orDash(per.ReadACL()), orDash(per.AllowPublish))
	return nil
}

// persona builds the persona the flags describe, reading --from when given.
func (opts *NewOptions) persona() (*workspace.Persona, error) {
	per := &workspace.Persona{Prompt: opts.Prompt}
	if opts.From != "" {
		data, src, err := opts.readFrom()
		if err != nil {
			return nil, err
		}
		if first, _, _ := bytes.Cut(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), []byte("\n")); strings.TrimSpace(string(first)) == "---" {
			if per, err = workspace.ParsePersona(src, data); err != nil {
				return nil, cmdutil.FlagErrorf("--from: %w", err)
			}
			per.Path = ""
		} else {
			per.Prompt = string(data)
		}
		if strings.TrimSpace(per.Prompt) == "" {
			return nil, cmdutil.RefuseUsage("--from "+opts.From, "the persona file has no prompt after its front matter, and a persona needs one", "")
		}
	}
	per.Name = opts.Name
	if opts.Role != "" {
		per.Role = opts.Role
	}
	if opts.Model != "" {
		per.Model = opts.Model
	}
	if opts.Subscribe != nil {
		per.Subscribe = opts.Subscribe
	}
	if opts.AllowSubscribe != nil {
		per.AllowSubscribe = opts.AllowSubscribe
	}
	if len(opts.AllowPublish) > 0 {
		per.AllowPublish = opts.AllowPublish
	}
	if per.Kind == "" {
		per.Kind = workspace.KindAgent
	}
	if per.Prompt != "" && !strings.HasSuffix(per.Prompt, "\n") {
		per.Prompt += "\n" // a text file ends with a newline
	}
	return per, nil
}

// readFrom reads --from: stdin for -, else a regular file relative to the current folder,
// of at most a persona's size. It refuses what cannot be a prompt: no text at all, or
// bytes that are not text (a NUL, or invalid UTF-8), as from a binary file.
func (opts *NewOptions) readFrom() (data []byte, name string, err error) {
	name = opts.From
	if name == "-" {
		name = "<stdin>"
	} else if !filepath.IsAbs(name) {
		wd, err := opts.Getwd()
		if err != nil {
			return nil, "", fmt.Errorf("current folder: %w", err)
		}
		name = filepath.Join(wd, name)
	}
	f := cmdutil.UserFile{Flag: "--from", Path: opts.From, Shown: opts.From, Kind: "a prompt or a persona file (UTF-8 text)", Max: cmdutil.MaxPromptFileSize, Stdin: opts.IO.In}
	if opts.From != "-" {
		f.Path = name
	}
	if data, err = f.Read(); err != nil {
		return nil, "", err
	}
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return nil, "", cmdutil.RefuseUsage("--from "+opts.From, "it holds no text, and a persona needs a prompt", "")
	case !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0:
		return nil, "", cmdutil.RefuseUsage("--from "+opts.From, "it is not text (it holds a NUL byte or invalid UTF-8): a prompt is UTF-8 text", "")
	}
	return data, name, nil
}

// commandLine is the `cotal personas new` command that creates per.
func (opts *NewOptions) commandLine(per *workspace.Persona) string {
	parts := []string{"cotal personas new", per.Name}
	if opts.From != "" {
		parts = append(parts, "--from", cmdutil.ShellQuote(opts.From))
	} else {
		parts = append(parts, "--prompt", cmdutil.ShellQuote(cmp.Or(opts.Prompt, cmdutil.StarterPrompt)))
	}
	if per.Role != "" {
		parts = append(parts, "--role", cmdutil.ShellQuote(per.Role))
	}
	if per.Model != "" {
		parts = append(parts, "--model", cmdutil.ShellQuote(per.Model))
	}
	for _, l := range []struct {
		flag string
		chs  []string
	}{{"--subscribe", per.Subscribe}, {"--allow-subscribe", per.AllowSubscribe}, {"--allow-publish", per.AllowPublish}} {
		for _, ch := range l.chs {
			parts = append(parts, l.flag, cmdutil.ShellQuote(ch))
		}
		if l.chs != nil && len(l.chs) == 0 && l.flag != "--allow-publish" {
			parts = append(parts, l.flag, "''")
		}
	}
	return strings.Join(parts, " ")
}
