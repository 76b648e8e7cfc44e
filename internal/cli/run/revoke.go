package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/runstore"
)

// MaxReason bounds a revocation's reason.
const MaxReason = 512

func newCmdRevoke(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "revoke RUN --local --by NAME --reason TEXT",
		Short: "Revoke a run's admission: no further channel effect, no resume",
		Long: `Write the run's revocation marker beside its admission (cotal_admission_<space>):
a create-only record saying who revoked it and why. The admission itself is never
rewritten; a host reads the marker before every channel effect, and no resume or
takeback continues the run (cotal run resume refuses it). cotal run ps lists the run as
revoked. A second revoke keeps the first marker. A revocation is written from the
mesh's project folder, so --local is required.`,
		Example: `  cotal run revoke run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local --by alice --reason "wrong repository"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runstore.CheckID("run id", args[0]); err != nil {
				return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
			}
			if o.By == "" || len(o.By) > runstore.MaxBy {
				return cmdutil.FlagErrorf("--by: give who revokes, at most %d bytes", runstore.MaxBy)
			}
			if o.Reason == "" || len(o.Reason) > MaxReason {
				return cmdutil.FlagErrorf("--reason: say why, at most %d bytes", MaxReason)
			}
			if !o.Local {
				return cmdutil.RefuseUsage("a revocation on the manager", "a revocation is written from the mesh's project folder",
					"cotal run revoke "+args[0]+" --local --by "+cmdutil.ShellQuote(o.By)+" --reason "+cmdutil.ShellQuote(o.Reason))
			}
			return runRevoke(cmd.Context(), o, args[0])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.Local, "local", false, "write the marker from this project folder (required)")
	cmd.Flags().StringVar(&o.By, "by", "", "who revokes (required)")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "why (required)")
	return cmd
}

func runRevoke(ctx context.Context, o *Options, runID string) error {
	js, space, closeFn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	recs, err := runstore.OpenRecords(ctx, js, space)
	if err != nil {
		return err
	}
	var spec runstore.RunSpec
	if _, err := recs.Get(ctx, runstore.RunSpecKey(runstore.DefaultEndpoint, runID), &spec); errors.Is(err, runstore.ErrNoRecord) {
		return cmdutil.Refuse("run "+runID, "the space has no record of it", "cotal run ps")
	} else if err != nil {
		return err
	}
	adm, err := runstore.OpenAdmissions(ctx, js, space)
	if err != nil {
		return err
	}
	rv, err := adm.Revoke(ctx, runstore.DefaultEndpoint, runstore.Revocation{Version: 1, RunID: runID, Reason: o.Reason, By: o.By, RevokedAt: time.Now().UnixMilli()})
	if err != nil {
		return fmt.Errorf("revoke run %s: %w", runID, err)
	}
	fmt.Fprintf(o.IO.Out, "run %s on %s: revoked by %s (%s); its hosts refuse the next channel effect, and it is not resumed or taken back\n",
		runID, runstore.DefaultEndpoint, cmdutil.OneLine(rv.By), cmdutil.OneLine(rv.Reason))
	fmt.Fprintf(o.IO.Out, "run ps now lists %s as revoked; the status record is left as its driver last wrote it\n", runID)
	return nil
}
