// Package personas implements `cotal personas`: offline list, show, new and rm of the
// project's persona files, .cotal/agents/<name>.md. Nothing here talks to a broker.
package personas

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// NewCmdPersonas builds `cotal personas` and its subcommands.
func NewCmdPersonas(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "personas <command>",
		Short: "List, show, create and remove the project's personas (offline)",
		Long: `A persona is an agent's identity card and prompt: the file .cotal/agents/<name>.md, YAML
front matter between --- lines (name, role, the channels it joins, its read ACL
allowSubscribe and post ACL allowPublish, capabilities, model, agent) followed by the
prompt. These commands edit the project's files only; no broker is needed.
The format is described in docs/personas.md.`,
		Example: `  cotal personas new dave --prompt "You build the backend." --role builder \
      --subscribe general --allow-subscribe 'team.>' --allow-subscribe general --allow-publish general
  cotal personas list
  cotal personas show dave
  cotal personas rm dave --force`,
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdShow(f, nil),
		NewCmdNew(f, nil),
		NewCmdRm(f, nil),
	)
	return cmdutil.Group(cmd)
}

// personaName is the persona a command names, as its argument or with --name, checked.
func personaName(args []string, flag, verb string) (string, error) {
	name, err := cmdutil.OneName(args, flag)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", cmdutil.FlagErrorf("no persona named: give its name as the argument (cotal personas %s dave) or with --name", verb)
	}
	return name, checkName(verb, name)
}

// checkName refuses a name that cannot be a persona's, suggesting one that can: a usage
// error.
func checkName(verb, name string) error {
	if workspace.CheckPersonaName(name) == nil {
		return nil
	}
	next := "cotal personas list"
	if verb == "new" {
		next = "cotal personas new " + suggestName(name) + " --prompt " + cmdutil.ShellQuote(cmdutil.StarterPrompt)
	}
	return cmdutil.RefuseUsage(fmt.Sprintf("persona name %q", name),
		fmt.Sprintf("a persona's name is its agent's actor: 1 to %d letters, digits or _ (no dots, dashes or spaces)", protocol.MaxActorLength),
		next)
}

// suggestName turns name into a valid persona name.
func suggestName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > protocol.MaxActorLength {
		s = s[:protocol.MaxActorLength]
	}
	if s == "" {
		s = "agent"
	}
	return s
}

// findProject returns the project found by walking up from the current folder; no
// project is (nil, wd, nil).
func findProject(getwd func() (string, error), getenv func(string) string) (*workspace.Project, string, error) {
	wd, err := getwd()
	if err != nil {
		return nil, "", fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, getenv)
	if errors.Is(err, workspace.ErrNoProject) {
		return nil, wd, nil
	}
	return proj, wd, err
}

// noPersona is the refusal for a name without a file.
func noPersona(verb, name string, proj *workspace.Project) error {
	return cmdutil.Refuse(fmt.Sprintf("%s persona %q", verb, name),
		fmt.Sprintf("there is no %s", proj.PersonaPath(name)), "cotal personas list")
}

// noProject is the refusal for a command that needs a project outside of one.
func noProject(verb, name, wd string) error {
	if err := workspace.ControlFileFrom(wd); err != nil {
		return cmdutil.Refuse(fmt.Sprintf("%s persona %q", verb, name), err.Error(), "")
	}
	return cmdutil.Refuse(fmt.Sprintf("%s persona %q", verb, name),
		fmt.Sprintf("no .cotal/ was found from %s upward, so there are no personas", wd), "cotal personas list")
}

// orDash joins list with ", ", or gives "-" for an empty one.
func orDash(list []string) string {
	if len(list) == 0 {
		return "-"
	}
	return strings.Join(list, ", ")
}

// View is a persona as `--json` prints it.
type View struct {
	Name           string         `json:"name"`
	Path           string         `json:"path"`
	Role           string         `json:"role,omitempty"`
	Kind           string         `json:"kind,omitempty"`
	Description    string         `json:"description,omitempty"`
	Model          string         `json:"model,omitempty"`
	Agent          string         `json:"agent,omitempty"`
	Tags           []string       `json:"tags,omitempty"`
	Subscribe      []string       `json:"subscribe"`
	AllowSubscribe []string       `json:"allowSubscribe,omitempty"`
	ReadACL        []string       `json:"readACL"`
	AllowPublish   []string       `json:"allowPublish"`
	Capabilities   []string       `json:"capabilities,omitempty"`
	Quiet          []string       `json:"quiet,omitempty"`
	Muted          []string       `json:"muted,omitempty"`
	Meta           map[string]any `json:"meta,omitempty"`
	Prompt         *string        `json:"prompt,omitempty"` // show only
}

// view builds the JSON view of per; withPrompt adds the prompt.
func view(per *workspace.Persona, withPrompt bool) View {
	nonNil := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	v := View{Name: per.Name, Path: per.Path, Role: per.Role, Kind: per.Kind, Description: per.Description,
		Model: per.Model, Agent: per.Agent, Tags: per.Tags, Subscribe: nonNil(per.BootSet()),
		AllowSubscribe: per.AllowSubscribe, ReadACL: nonNil(per.ReadACL()), AllowPublish: nonNil(per.AllowPublish),
		Capabilities: per.Capabilities, Quiet: per.Quiet, Muted: per.Muted, Meta: per.Meta}
	if withPrompt {
		v.Prompt = &per.Prompt
	}
	return v
}
