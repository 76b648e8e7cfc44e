package personas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/workspace"
)

// ShowOptions are the flags of `cotal personas show`.
type ShowOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string
	Name   string
	JSON   bool
}

// NewCmdShow builds `cotal personas show`.
func NewCmdShow(f *cmdutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "show <name> [--json]",
		Short: "Show one persona: identity, access and prompt",
		Long: `Show the persona <name> (.cotal/agents/<name>.md): its identity card, the channels it
joins at boot, may read (read ACL) and may post to (post ACL), then its prompt. A file
that is not a valid persona is an error naming the line that is wrong.`,
		Example: `  cotal personas show dave
  cotal personas show dave --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := personaName(args, opts.Name, "show")
			if err != nil {
				return err
			}
			opts.Name = name
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runShow(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the persona's name (the same as the argument)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object, prompt included")
	return cmd
}

func runShow(_ context.Context, opts *ShowOptions) error {
	proj, wd, err := findProject(opts.Getwd, opts.Getenv)
	if err != nil {
		return err
	}
	if proj == nil {
		return noProject("show", opts.Name, wd)
	}
	per, err := proj.Persona(opts.Name)
	if errors.Is(err, workspace.ErrNoPersona) {
		return noPersona("show", opts.Name, proj)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		b, err := json.MarshalIndent(view(per, true), "", "  ")
		if err != nil {
			return fmt.Errorf("encode persona %q: %w", per.Name, err)
		}
		fmt.Fprintln(opts.IO.Out, string(b))
		return nil
	}
	out := opts.IO.Out
	line := func(key, v string) {
		if v != "" {
			fmt.Fprintf(out, "%-13s %s\n", key+":", v)
		}
	}
	readFrom := "subscribe"
	switch {
	case per.ReadSetOmitted():
		// An omitted read set once read general; it now reads nothing, as the reference's
		// agent-file.ts does, and the line says how to keep general.
		readFrom = "none named: DM-only; add subscribe: [general] to read general"
	case len(per.AllowSubscribe) > 0:
		readFrom = "allowSubscribe"
	}
	line("name", per.Name)
	line("role", per.Role)
	line("kind", per.Kind)
	line("description", per.Description)
	line("joins", orDash(per.BootSet()))
	line("read", orDash(per.ReadACL())+"  ("+readFrom+")")
	line("post", orDash(per.AllowPublish)+"  (allowPublish)")
	line("capabilities", strings.Join(per.Capabilities, ", "))
	line("model", per.Model)
	line("agent", per.Agent)
	line("tags", strings.Join(per.Tags, ", "))
	line("quiet", strings.Join(per.Quiet, ", "))
	line("muted", strings.Join(per.Muted, ", "))
	meta := make([]string, 0, len(per.Meta))
	for k := range per.Meta {
		meta = append(meta, k)
	}
	sort.Strings(meta)
	line("meta", strings.Join(meta, ", "))
	line("file", per.Path)
	fmt.Fprintln(out, "---")
	fmt.Fprint(out, per.Prompt)
	if per.Prompt != "" && !strings.HasSuffix(per.Prompt, "\n") {
		fmt.Fprintln(out)
	}
	return nil
}
