package seats

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// PsOptions are the flags of `cotal ps`.
type PsOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectOperator cmdutil.ConnectAsFunc
	Mesh            cmdutil.MeshFlags
	JSON            bool
	Wide            bool
	Now             func() time.Time
}

// NewCmdPs builds `cotal ps`.
func NewCmdPs(f *cmdutil.Factory, runF func(context.Context, *PsOptions) error) *cobra.Command {
	opts := &PsOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "ps [--json] [--wide]",
		Short: "List the agents the manager runs",
		Long: `List the seats of the space's agent manager: one row per agent with its persona, harness,
model, process state (starting, running and for how long, stopping, or exited and its
code) and mesh state (idle, working, waiting, offline, or not in roster). The manager keeps
the 32 most recently ended seats. --json prints one JSON object per seat per line; --wide
adds the pid, lifecycle uid, who spawned it, its folder and host.`,
		Example: `  cotal ps
  cotal ps --wide --space team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.JSON && opts.Wide {
				return cmdutil.FlagErrorf("--json already holds every field; leave out --wide")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runPs(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per seat per line")
	cmd.Flags().BoolVar(&opts.Wide, "wide", false, "add pid, lifecycle uid, spawner, folder and host")
	return cmd
}

func runPs(ctx context.Context, opts *PsOptions) error {
	c, ep, t, err := Dial(ctx, opts.Resolve, opts.ConnectOperator, opts.Mesh)
	if err != nil {
		return err
	}
	defer ep.Close()
	var res protocol.PsResult
	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &res); err != nil {
		return Explain(err, t.Space)
	}
	if opts.JSON {
		for _, s := range res.Seats {
			if err := cmdutil.WriteJSONLine(opts.IO.Out, s); err != nil {
				return err
			}
		}
		return nil
	}
	if len(res.Seats) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "no agents run on the manager of space %s; start one: cotal spawn --detach\n", t.Space)
		return nil
	}
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	hdr := "NAME\tPERSONA\tAGENT\tMODEL\tPROCESS\tMESH"
	if opts.Wide {
		hdr += "\tPID\tUID\tSPAWNER\tCWD\tHOST"
	}
	fmt.Fprintln(w, hdr)
	now := opts.Now()
	for _, s := range res.Seats {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", esc(s.Name), esc(s.Persona), esc(s.Agent), orDash(esc(s.Model)), Process(s, now), s.Mesh)
		if opts.Wide {
			line += fmt.Sprintf("\t%d\t%s\t%s\t%s\t%s", s.PID, orDash(s.UID), esc(s.Spawner), esc(s.Cwd), esc(s.Host))
		}
		fmt.Fprintln(w, line)
	}
	return w.Flush()
}

// Process is a seat's process state for a person: "running 3m", "exited 1", ...
func Process(s protocol.SeatInfo, now time.Time) string {
	switch s.Process {
	case protocol.SeatRunning:
		up := now.Sub(time.UnixMilli(s.Started)).Round(time.Second)
		if s.Adopted {
			return "running (adopted)"
		}
		return "running " + up.String()
	case protocol.SeatExited:
		if s.Code == nil {
			return "exited ?"
		}
		return fmt.Sprintf("exited %d", *s.Code)
	}
	return string(s.Process)
}

func esc(s string) string { return termsafe.Escape(s) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
