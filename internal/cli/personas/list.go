package personas

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/workspace"
)

// Invalid is a persona file that is not a valid persona, as `list --json` prints it.
type Invalid struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Error string `json:"error"` // the file, line and reason
}

// ListOptions are the flags of `cotal personas list`.
type ListOptions struct {
	IO      *iostreams.IOStreams
	Getwd   func() (string, error)
	Getenv  func(string) string
	Verbose bool
	JSON    bool
}

// NewCmdList builds `cotal personas list`.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "list [-v] [--json]",
		Short: "List the project's personas with their role, read ACL and post ACL",
		Long: `List every persona file of the project (.cotal/agents/*.md), sorted by name: its role,
read ACL (allowSubscribe, or subscribe when that is omitted; "-" when both are: DM-only) and
post ACL (allowPublish; "-" means it posts nowhere). A file that is not a valid persona is
listed as invalid with the file, line and reason. -v adds the boot joins, kind, model, agent and capabilities.`,
		Example: `  cotal personas list
  cotal personas list -v
  cotal personas list --json | jq -r '.[] | select(.error) | .path'`,
		Aliases: []string{"ls"},
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "show boot joins, kind, model, agent and capabilities too")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON array")
	return cmd
}

func runList(_ context.Context, opts *ListOptions) error {
	proj, wd, err := findProject(opts.Getwd, opts.Getenv)
	if err != nil {
		return err
	}
	if proj == nil {
		if opts.JSON {
			fmt.Fprintln(opts.IO.Out, "[]")
		}
		if err := workspace.ControlFileFrom(wd); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "no personas: %v\n", err)
			return nil
		}
		fmt.Fprintf(opts.IO.ErrOut, "no personas: no .cotal/ found from %s upward; personas live in a project's .cotal/: run this in your project's folder\n", wd)
		return nil
	}
	files, err := proj.PersonaFiles()
	if err != nil {
		return err
	}
	if opts.JSON {
		views := make([]any, 0, len(files))
		for _, pf := range files {
			if pf.Err != nil {
				views = append(views, Invalid{Name: pf.Name, Path: pf.Path, Error: pf.Err.Error()})
				continue
			}
			views = append(views, view(pf.Persona, false))
		}
		b, err := json.MarshalIndent(views, "", "  ")
		if err != nil {
			return fmt.Errorf("encode personas: %w", err)
		}
		fmt.Fprintln(opts.IO.Out, string(b))
		return nil
	}
	if len(files) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "no personas in %s\nnext: run `cotal personas new default --prompt %s`\n", proj.AgentsDir(), cmdutil.ShellQuote(cmdutil.StarterPrompt))
		return nil
	}
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	if opts.Verbose {
		fmt.Fprintln(w, "NAME\tROLE\tREAD\tPOST\tJOINS\tKIND\tMODEL\tAGENT\tCAPABILITIES")
	} else {
		fmt.Fprintln(w, "NAME\tROLE\tREAD\tPOST")
	}
	var invalid []workspace.PersonaFile
	for _, pf := range files {
		if pf.Err != nil {
			invalid = append(invalid, pf)
			continue
		}
		p := pf.Persona
		fmt.Fprintf(w, "%s\t%s\t%s\t%s", p.Name, orDash(nonEmpty(p.Role)), orDash(p.ReadACL()), orDash(p.AllowPublish))
		if opts.Verbose {
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s", orDash(p.BootSet()), p.Kind, orDash(nonEmpty(p.Model)),
				orDash(nonEmpty(p.Agent)), orDash(p.Capabilities))
		}
		fmt.Fprintln(w)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("print personas: %w", err)
	}
	// Invalid files come after the table: a row with fewer cells would break its columns.
	for _, pf := range invalid {
		fmt.Fprintf(opts.IO.Out, "%s  invalid: %v\n", pf.Name, pf.Err)
	}
	if len(invalid) > 0 {
		rms := make([]string, len(invalid))
		for i, pf := range invalid {
			rms[i] = "`cotal personas rm " + pf.Name + " --force`"
			if workspace.CheckPersonaName(pf.Name) != nil { // rm takes persona names only
				rms[i] = "`rm " + cmdutil.ShellQuote(pf.Path) + "`"
			}
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s: fix the line named, or delete the file: %s\n", cmdutil.Count(len(invalid), "invalid persona file"), strings.Join(rms, ", "))
	}
	return nil
}

// nonEmpty is s as a list of one, or an empty list.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
