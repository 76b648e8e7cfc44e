package claims

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// ReleaseOptions are the arguments and flags of `cotal claims release`.
type ReleaseOptions struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh   cmdutil.MeshFlags
	Holder string
	Paths  []string
	All    bool
	JSON   bool
}

// ReleaseReport is what `cotal claims release --json` prints.
type ReleaseReport struct {
	Holder   string   `json:"holder"`
	Released []string `json:"released"`
	NotHeld  []string `json:"notHeld,omitempty"`
}

func newCmdRelease(f *cmdutil.Factory, runF func(context.Context, *ReleaseOptions) error) *cobra.Command {
	opts := &ReleaseOptions{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
	cmd := &cobra.Command{
		Use:   "release <holder-id> (--path P... | --all) [--json]",
		Short: "Release another holder's file claims, as the operator",
		Long: `Release file claims of one holder (its id, <owner>.<actor>, as cotal claims shows it): the
paths given with --path, or all of them with --all. For a claim an agent left behind (it
stopped without releasing, and its ttl is long). Needs the project's keys: it runs as
the project's provisioner; an agent can release only its own claims.`,
		Example: `  cotal claims release local.alice --path internal/cli
  cotal claims release local.alice --all`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Holder = args[0]
			if _, err := protocol.ParsePrincipal(opts.Holder); err != nil {
				return cmdutil.FlagErrorf("holder %q: %v; cotal claims lists the holders' ids", opts.Holder, err)
			}
			if opts.All == (len(opts.Paths) > 0) {
				return cmdutil.FlagErrorf("give --path (one or more) or --all, not both and not neither")
			}
			if len(opts.Paths) > claims.MaxPaths {
				return cmdutil.FlagErrorf("%d paths: release at most %d at once, or --all", len(opts.Paths), claims.MaxPaths)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRelease(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringArrayVar(&opts.Paths, "path", nil, "a claimed path to release (repeatable)")
	cmd.Flags().BoolVar(&opts.All, "all", false, "release every claim of the holder")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runRelease(ctx context.Context, opts *ReleaseOptions) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	holder, err := protocol.ParsePrincipal(opts.Holder)
	if err != nil {
		return cmdutil.FlagErrorf("holder %q: %v", opts.Holder, err)
	}
	root := ""
	if target.Project != nil {
		root = target.Project.Root
	}
	for _, p := range opts.Paths {
		if _, err := claims.Normalize(p, root); err != nil {
			return cmdutil.FlagErrorf("--path: %v", err)
		}
	}
	ep, err := opts.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return err
	}
	defer ep.Close()
	st := &claims.Store{JS: ep.JetStream(), Space: target.Space, Holder: holder, Root: root}
	rel, notHeld, err := st.Release(ctx, opts.Paths, opts.All)
	if err != nil {
		return fmt.Errorf("release the claims of %s: %w", holder, err)
	}
	rep := ReleaseReport{Holder: holder.String(), Released: rel, NotHeld: notHeld}
	if rep.Released == nil {
		rep.Released = []string{}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, rep)
	}
	fmt.Fprintf(opts.IO.Out, "released %s of %s", cmdutil.Count(uint64(len(rel)), "claim"), holder)
	if len(rel) > 0 {
		fmt.Fprintf(opts.IO.Out, ": %s", cmdutil.OneLine(strings.Join(rel, ", ")))
	}
	fmt.Fprintln(opts.IO.Out)
	if len(notHeld) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "not claimed by %s (nothing done): %s\n", holder, cmdutil.OneLine(strings.Join(notHeld, ", ")))
	}
	return nil
}
