package peers

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// LsOptions are the flags of `cotal a2a ls`.
type LsOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh cmdutil.MeshFlags
	JSON bool
}

// Entry is one registered agent in `cotal a2a ls --json`: its registration and whether
// a bridge presents it now.
type Entry struct {
	a2apeer.Registration
	Online bool `json:"online"`
}

// Report is what `cotal a2a ls --json` prints.
type Report struct {
	Space string  `json:"space"`
	Peers []Entry `json:"peers"`
}

// NewCmdLs builds `cotal a2a ls`.
func NewCmdLs(f *cmdutil.Factory, runF func(context.Context, *LsOptions) error) *cobra.Command {
	opts := &LsOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List the external A2A agents registered on the space",
		Long: `List the external A2A agents registered on the space (cotal a2a add): name, the URL
they were registered at, the role they serve, their skills, and whether a bridge
(cotal a2a) presents them in the roster now. Read-only.`,
		Example: `  cotal a2a ls
  cotal a2a ls --space review --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runLs(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runLs(ctx context.Context, opts *LsOptions) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	rep, err := List(ctx, ep)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	if len(rep.Peers) == 0 {
		fmt.Fprintf(out, "no A2A peers on space %s\n", rep.Space)
		fmt.Fprintln(opts.IO.ErrOut, "next: run `cotal a2a add NAME URL` to register one")
		return nil
	}
	fmt.Fprintf(out, "a2a peers on space %s (%d)\n", rep.Space, len(rep.Peers))
	for _, e := range rep.Peers {
		fmt.Fprintln(out, "  "+Line(e))
	}
	return nil
}

// List reads the registry of ep's space (ep must be the project's own identity) with
// each agent's presence.
func List(ctx context.Context, ep *client.Endpoint) (Report, error) {
	regs, err := (&a2apeer.Store{JS: ep.JetStream(), Space: ep.Space()}).List(ctx)
	if err != nil {
		return Report{}, err
	}
	on := map[string]bool{}
	if peers, err := ep.Roster(ctx); err == nil {
		for _, p := range peers {
			on[p.Card.ID] = p.Online
		}
	}
	rep := Report{Space: ep.Space(), Peers: []Entry{}}
	for _, r := range regs {
		r.URL, r.CardURL, r.Endpoint = redact.URL(r.URL), redact.URL(r.CardURL), redact.URL(r.Endpoint) // shown: no query token
		rep.Peers = append(rep.Peers, Entry{Registration: r, Online: on[protocol.OwnerLocal+"."+r.Name]})
	}
	return rep, nil
}

// Line is one agent on one line: name, state, URL, role and skills, escaped.
func Line(e Entry) string {
	state := "offline"
	if e.Online {
		state = "online"
	}
	s := fmt.Sprintf("%-16s %-8s %s", e.Name, state, cmdutil.OneLine(e.URL))
	if e.Role != "" {
		s += "  role " + e.Role
	}
	return s + "  skills: " + skillNames(e.Skills)
}
