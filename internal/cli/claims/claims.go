// Package claims implements `cotal claims`: the live file claims of a space, who holds
// which path, exclusive or shared, since when, why and until when.
package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/trust"
)

// Options are the flags of `cotal claims`.
type Options struct {
	IO            *iostreams.IOStreams
	Resolve       cmdutil.ResolveFunc // the mesh the flags name; only run calls it
	ConnectPerson cmdutil.ConnectAsFunc
	Now           func() time.Time // nil means time.Now

	Mesh cmdutil.MeshFlags
	Path string
	JSON bool
}

// Claim is one claim in `cotal claims --json` (and in `cotal status --json`'s roster).
type Claim struct {
	Path      string `json:"path"`
	Holder    string `json:"holder"`   // its display name
	HolderID  string `json:"holderId"` // its principal, <owner>.<actor>
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason,omitempty"`
	Since     string `json:"since"`     // RFC 3339, UTC
	ExpiresAt string `json:"expiresAt"` // RFC 3339, UTC
}

// Report is what `cotal claims --json` prints.
type Report struct {
	Space  string  `json:"space"`
	Claims []Claim `json:"claims"`
}

// Of turns a live claim into its report form.
func Of(c claims.Claim) Claim {
	return Claim{Path: c.Path, Holder: c.Name, HolderID: c.Holder, Exclusive: c.Exclusive, Reason: c.Reason,
		Since: time.UnixMilli(c.Since).UTC().Format(time.RFC3339), ExpiresAt: c.ExpiresAt().UTC().Format(time.RFC3339)}
}

// NewCmdClaims builds `cotal claims`.
func NewCmdClaims(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectPerson: f.ConnectPerson}
	cmd := &cobra.Command{
		Use:   "claims [--path P] [--json]",
		Short: "Show which files agents claimed, and who, since when and why",
		Long: `Show the live file claims of the space: agents editing one repository claim the files
or directories they work on (cotal_claim_paths), exclusive or shared, with a reason and a
ttl, so others keep out of their way. Claims are advisory (nothing is locked on disk) and
lapse after their ttl, whether or not their holder still runs. --path shows only the
claims overlapping a path (the same path, a directory holding it, or a file inside it),
given relative to the project, or absolute inside it. Read-only.`,
		Example: `  cotal claims
  cotal claims --path internal/cli
  cotal claims --space review --json
  cotal claims release local.alice --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runClaims(cmd.Context(), opts)
		},
	}
	cmd.AddCommand(newCmdRelease(f, nil))
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Path, "path", "", "only the claims overlapping this path")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runClaims(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	root := ""
	if target.Project != nil {
		root = target.Project.Root
	}
	var filter string
	if opts.Path != "" {
		if filter, err = claims.Normalize(opts.Path, root); err != nil {
			return cmdutil.FlagErrorf("--path: %v", err)
		}
	}
	ep, err := opts.ConnectPerson(ctx, target, trust.ProfileObserver)
	if err != nil {
		return err
	}
	defer ep.Close()
	st := &claims.Store{JS: ep.JetStream(), Space: target.Space, Now: opts.Now}
	all, err := st.List(ctx)
	if err != nil {
		return fmt.Errorf("%w\nnext: run `cotal up --space %s` on the mesh's host to add the claims bucket", err, target.Space)
	}
	rep := Report{Space: target.Space, Claims: []Claim{}}
	for _, c := range all {
		if filter == "" || claims.Overlap(filter, c.Path) {
			rep.Claims = append(rep.Claims, Of(c))
		}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	out := opts.IO.Out
	if len(rep.Claims) == 0 {
		if filter != "" {
			fmt.Fprintf(out, "no claim overlaps %s on space %s\n", cmdutil.OneLine(filter), rep.Space)
			return nil
		}
		fmt.Fprintf(out, "no files are claimed on space %s\n", rep.Space)
		return nil
	}
	fmt.Fprintf(out, "claims on space %s (%d)\n", rep.Space, len(rep.Claims))
	for _, c := range rep.Claims {
		kind := "shared"
		if c.Exclusive {
			kind = "exclusive"
		}
		fmt.Fprintf(out, "  %-32s %-9s %s (%s) since %s until %s", cmdutil.OneLine(c.Path), kind, cmdutil.OneLine(c.Holder),
			cmdutil.OneLine(c.HolderID), c.Since, c.ExpiresAt)
		if c.Reason != "" {
			fmt.Fprintf(out, ": %s", cmdutil.OneLine(c.Reason))
		}
		fmt.Fprintln(out)
	}
	return nil
}
