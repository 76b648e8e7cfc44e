// Package describe implements `cotal describe`: one screen on what this project's cotal is:
// the project, the mesh and its mode, the space, the daemons serving it with their builds,
// and how many endpoints, channels, messages and tasks it holds.
package describe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/endpoints"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal describe`.
type Options struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // only run calls it
	ConnectPerson   cmdutil.ConnectAsFunc
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	JSON            bool
	Version         string // this binary's version
}

// Report is what `cotal describe --json` prints.
type Report struct {
	CLI      string   `json:"cli"`               // this binary's version
	Project  string   `json:"project,omitempty"` // the project root; "" outside a project
	Server   string   `json:"server"`
	Mode     string   `json:"mode"`          // open, authenticated or user-auth
	Remote   bool     `json:"remote"`        // a mesh registered with cotal meshes add, not this project's
	PID      int      `json:"pid,omitempty"` // the project's broker
	Space    string   `json:"space"`
	Spaces   []string `json:"spaces,omitempty"` // every space the project's mesh serves
	Protocol string   `json:"protocolVersion"`  // the wire contract this binary speaks
	// Daemons are the rows of cotal endpoints that serve the space: its lanes (delivery,
	// auth) and managers.
	Daemons    []endpoints.Endpoint `json:"daemons"`
	DaemonsErr string               `json:"daemonsError,omitempty"`
	Counts     Counts               `json:"counts"`
}

// Counts are the space's sizes.
type Counts struct {
	Endpoints map[string]int `json:"endpoints"` // by kind (cotal endpoints' kinds)
	Online    int            `json:"online"`    // endpoints of presence online now
	Channels  int            `json:"channels"`
	Messages  uint64         `json:"messages"`        // held in the channels' history
	Tasks     map[string]int `json:"tasks,omitempty"` // by status; absent without a task board
}

// NewCmdDescribe builds `cotal describe`.
func NewCmdDescribe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectPerson: f.ConnectPerson, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "describe [--json]",
		Short: "Say what this cotal is: project, mesh, mode, space, daemons and counts",
		Long: `Describe the cotal this project uses, in one screen: the project folder, the mesh (its
URL, its mode: open, authenticated or user-auth, and the broker's pid when this project
runs it), the space and the others the mesh serves, the daemons serving the space
(delivery, auth service, managers) with the build each announces, and how many
endpoints (by kind), channels, messages and tasks the space holds. Read-only;
cotal endpoints lists the endpoints, cotal status the roster and channels.`,
		Example: `  cotal describe
  cotal describe --space review --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Version = cmd.Root().Version
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDescribe(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runDescribe(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	ep := &endpoints.Options{ConnectPerson: opts.ConnectPerson, ConnectOperator: opts.ConnectOperator}
	seen, err := endpoints.Read(ctx, ep, t)
	if err != nil {
		return err
	}
	rep := Report{CLI: opts.Version, Server: t.Server, Mode: mode(t), Remote: t.Remote != nil, Space: t.Space,
		Protocol: protocol.ProtocolVersion, Daemons: []endpoints.Endpoint{}, DaemonsErr: seen.Leases,
		Counts: Counts{Endpoints: map[string]int{}}}
	if t.Project != nil {
		rep.Project = t.Project.Root
	}
	if m := t.Mesh; m != nil && t.OnProjectMesh() {
		rep.PID, rep.Spaces = m.PID, m.Spaces
	}
	for _, e := range seen.Endpoints {
		switch e.Kind {
		case endpoints.KindDelivery, endpoints.KindAuth, endpoints.KindManager:
			rep.Daemons = append(rep.Daemons, e)
		}
		if e.Kind != endpoints.KindDelivery && e.Kind != endpoints.KindAuth {
			rep.Counts.Endpoints[e.Kind]++
			if e.State != string(protocol.StatusOffline) {
				rep.Counts.Online++
			}
		}
	}
	if err := counts(ctx, opts, t, &rep.Counts); err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	printReport(opts.IO, rep)
	return nil
}

// mode names how the target's mesh authenticates.
func mode(t cmdutil.Target) string {
	switch {
	case t.Remote != nil:
		return "user-auth"
	case !t.Auth():
		return "open"
	case t.Project != nil:
		if _, err := authsvc.ReadPin(t.Project.AuthDir(), t.Space); err == nil {
			return "user-auth"
		}
	}
	if t.Mesh != nil && t.Mesh.Mode == workspace.ModeOpen && t.OnProjectMesh() {
		return "open"
	}
	return "authenticated"
}

// counts reads the channels and the task board as an observer.
func counts(ctx context.Context, opts *Options, t cmdutil.Target, c *Counts) error {
	ep, err := opts.ConnectPerson(ctx, t, trust.ProfileObserver)
	if err != nil {
		return err
	}
	defer ep.Close()
	chans, err := ep.ChannelStats(ctx)
	if err != nil {
		return err
	}
	c.Channels = len(chans)
	for _, ch := range chans {
		c.Messages += ch.Messages
	}
	if b, err := taskboard.Connect(ctx, ep.Conn(), ep.Space(), ep.Principal(), taskboard.Options{}); err == nil {
		if all, err := b.List(ctx); err == nil {
			c.Tasks = map[string]int{}
			for _, task := range all {
				c.Tasks[task.Status]++
			}
		}
	}
	return nil
}

// printReport writes the report; what daemons and peers wrote is escaped.
func printReport(ios *iostreams.IOStreams, r Report) {
	out := ios.Out
	project := r.Project
	if project == "" {
		project = "none (not in a project folder)"
	}
	fmt.Fprintf(out, "cotal     %s (protocol %s)\n", r.CLI, r.Protocol)
	fmt.Fprintf(out, "project   %s\n", project)
	mesh := r.Server + "  " + r.Mode
	switch {
	case r.Remote:
		mesh += ", a registered remote mesh"
	case r.PID != 0:
		mesh += fmt.Sprintf(", this project's broker, pid %d", r.PID)
	}
	fmt.Fprintf(out, "mesh      %s\n", mesh)
	fmt.Fprintf(out, "space     %s", r.Space)
	if others := slices.DeleteFunc(slices.Clone(r.Spaces), func(s string) bool { return s == r.Space }); len(others) > 0 {
		fmt.Fprintf(out, " (the mesh also serves %s)", strings.Join(others, ", "))
	}
	fmt.Fprintln(out)
	switch {
	case len(r.Daemons) == 0 && r.DaemonsErr != "":
		fmt.Fprintf(out, "daemons   unknown: %s\n", cmdutil.OneLine(r.DaemonsErr))
	case len(r.Daemons) == 0:
		fmt.Fprintln(out, "daemons   none serving the space")
	}
	for i, d := range r.Daemons {
		label := "daemons  "
		if i > 0 {
			label = "         "
		}
		version := d.Version
		if version == "" {
			version = "version not announced"
		}
		fmt.Fprintf(out, "%s %s %s, %s", label, d.Kind, d.State, cmdutil.OneLine(version))
		if d.Host != "" && d.Kind != endpoints.KindAuth {
			fmt.Fprintf(out, ", host %s pid %d", cmdutil.OneLine(d.Host), d.PID)
		}
		fmt.Fprintln(out)
	}
	c := r.Counts
	total := 0
	var kinds []string
	for _, k := range []string{endpoints.KindManager, endpoints.KindWeb, endpoints.KindConsole, endpoints.KindService, endpoints.KindPerson, endpoints.KindAgent} {
		if n := c.Endpoints[k]; n > 0 {
			total += n
			kinds = append(kinds, cmdutil.Count(n, k))
		}
	}
	fmt.Fprintf(out, "endpoints %d, %d online", total, c.Online)
	if len(kinds) > 0 {
		fmt.Fprintf(out, ": %s", strings.Join(kinds, ", "))
	}
	fmt.Fprintln(out, " (cotal endpoints)")
	fmt.Fprintf(out, "channels  %d, %s in their history\n", c.Channels, cmdutil.Count(c.Messages, "message"))
	if c.Tasks != nil {
		held := c.Tasks[taskboard.Claimed] + c.Tasks[taskboard.Working] + c.Tasks[taskboard.Blocked]
		fmt.Fprintf(out, "tasks     %d open, %d held, %d done\n", c.Tasks[taskboard.Open], held, c.Tasks[taskboard.Done])
	}
}
