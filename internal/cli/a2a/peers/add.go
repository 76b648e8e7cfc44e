// Package peers implements the outbound half of `cotal a2a`: add, rm and ls register
// external A2A agents (ADK, LangGraph, CrewAI, any service with an Agent Card and
// JSON-RPC) as peers of a space, and NewBridge builds the bridge that presents them
// (a2apeer.Bridge), which `cotal a2a` runs.
package peers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// AddOptions are the flags of `cotal a2a add`.
type AddOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc
	HTTP            a2apeer.HTTP     // how the agent's card is read
	Now             func() time.Time // nil means time.Now

	Mesh      cmdutil.MeshFlags
	Name, URL string
	TokenFile string
	Role      string
	Replace   bool
	JSON      bool
}

// NewCmdAdd builds `cotal a2a add`.
func NewCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "add NAME URL [--token-file F] [--role ROLE]",
		Short: "Register an external A2A agent as a peer of the space",
		Long: `Register an external agent that speaks A2A (the Agent2Agent protocol, v0.3: Google ADK,
LangGraph, CrewAI or any service with an Agent Card and JSON-RPC) as a peer of the space
named NAME. Its Agent Card is read now, from URL (the agent's base URL, whose card is at
/.well-known/agent-card.json, or the card's own URL) and checked: https, or http on
loopback only; at most 1 MiB; redirects only on the URL's own origin; JSON-RPC served on
the card's own host.

While ` + "`cotal a2a`" + ` runs, the agent is in the roster as NAME (harness a2a, with its
card's skills); a DM to it, or an anycast to --role, becomes an A2A message, and its
answer comes back as a DM replying to it. --token-file gives a bearer token the agent
wants; it is kept in the project's .cotal/ folder (0600), never in the space.
The registration is a row of the space's cotal_a2apeers bucket, which only the project's
own identity may read or write. Run it again with --replace to read a changed card.`,
		Example: `  cotal a2a add support https://support.example.com
  cotal a2a add planner http://127.0.0.1:41241 --role planning
  cotal a2a add billing https://agents.example.com/billing/.well-known/agent-card.json --token-file billing.token`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.URL = args[0], args[1]
			if err := a2apeer.CheckName(opts.Name); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if _, err := a2apeer.CheckURL(opts.URL); err != nil {
				shown := redact.URL(opts.URL) // never the password or a query's token
				why := strings.TrimPrefix(strings.TrimPrefix(err.Error(), a2apeer.ErrURL.Error()+": "), strconv.Quote(shown)+": ")
				return cmdutil.RefuseUsage("URL "+shown, why+
					"; give the agent's https URL (http only on loopback)", "")
			}
			if opts.Role != "" {
				if err := protocol.CheckRole(opts.Role); err != nil {
					return cmdutil.FlagErrorf("--role: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAdd(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "file holding the bearer token the agent wants (one line)")
	cmd.Flags().StringVar(&opts.Role, "role", "", "anycast role the agent serves (asks to it go to the agent)")
	cmd.Flags().BoolVar(&opts.Replace, "replace", false, "replace a registration of the same name (reads the card again)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the registration as one JSON document")
	return cmd
}

func runAdd(ctx context.Context, opts *AddOptions) error {
	token := ""
	if opts.TokenFile != "" {
		b, err := (cmdutil.UserFile{Flag: "--token-file", Path: opts.TokenFile, Kind: "a token file", Max: maxToken}).Read()
		if err != nil {
			return err
		}
		if token, err = checkToken(b); err != nil {
			return cmdutil.FlagErrorf("--token-file %s: %v", opts.TokenFile, err)
		}
	}
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if token != "" && target.Project == nil {
		return cmdutil.Refuse("--token-file outside a project", "the token is kept in the project's .cotal/ folder, beside the bridge that sends it: run cotal a2a add in the project's folder", "")
	}
	card, cardURL, err := opts.HTTP.FetchCard(ctx, opts.URL, token)
	if err != nil {
		return fmt.Errorf("%w\nnothing was registered", err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	reg, err := a2apeer.FromCard(opts.Name, opts.URL, cardURL.String(), card, opts.Role, token != "", now())
	if err != nil {
		return fmt.Errorf("agent card %s: %w\nnothing was registered", redact.URL(cardURL.String()), err)
	}
	ep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	if err := nameFree(ctx, ep, opts.Name); err != nil {
		return err
	}
	store := &a2apeer.Store{JS: ep.JetStream(), Space: target.Space}
	if !opts.Replace {
		if _, err := store.Get(ctx, opts.Name); err == nil {
			return cmdutil.Refuse("a2a peer "+opts.Name, "a peer of that name is registered on space "+target.Space,
				"cotal a2a add "+opts.Name+" "+redact.URL(opts.URL)+" --replace")
		}
	}
	if target.Project != nil {
		if token != "" {
			err = writeToken(target.Project, target.Space, opts.Name, token)
		} else {
			err = removeToken(target.Project, target.Space, opts.Name)
		}
		if err != nil {
			return err
		}
	}
	if err := store.Put(ctx, reg, opts.Replace); err != nil {
		if errors.Is(err, a2apeer.ErrExists) {
			return cmdutil.Refuse("a2a peer "+opts.Name, "a peer of that name was registered meanwhile", "cotal a2a add "+opts.Name+" "+redact.URL(opts.URL)+" --replace")
		}
		return err
	}
	shown := reg // what is printed names no password or query token of the URLs
	shown.URL, shown.CardURL, shown.Endpoint = redact.URL(reg.URL), redact.URL(reg.CardURL), redact.URL(reg.Endpoint)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, shown)
	}
	fmt.Fprintf(opts.IO.Out, "registered %s on space %s: %s %s, JSON-RPC at %s\n", reg.Name, target.Space,
		cmdutil.OneLine(reg.AgentName), cmdutil.OneLine(reg.Version), cmdutil.OneLine(shown.Endpoint))
	fmt.Fprintf(opts.IO.Out, "  skills: %s\n", skillNames(reg.Skills))
	fmt.Fprintf(opts.IO.ErrOut, "next: run `cotal a2a` to bridge it; it joins space %s as %s\n", target.Space, reg.Name)
	return nil
}

// nameFree refuses a name a peer other than an A2A one holds in the space now.
func nameFree(ctx context.Context, ep *client.Endpoint, name string) error {
	peers, err := ep.Roster(ctx)
	if err != nil {
		return err
	}
	for _, p := range peers {
		if p.Online && p.Card.ID == protocol.OwnerLocal+"."+name && p.Harness() != a2apeer.Harness {
			return cmdutil.Refuse("a2a peer "+name, fmt.Sprintf("%s (%s) is online in the space under that name: register the agent under another name", cmdutil.OneLine(p.Card.Name), p.Card.ID), "")
		}
	}
	return nil
}

// skillNames lists skills by name, on one line, escaped.
func skillNames(ss []protocol.Skill) string {
	if len(ss) == 0 {
		return "(none)"
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = cmdutil.OneLine(s.Name)
	}
	return strings.Join(names, ", ")
}
