package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

func newCmdMigrate(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "migrate RUN --local --file PROGRAM [--json]",
		Short: "Check whether an edited program can take a run over (a dry walk; writes nothing)",
		Long: `Walk the edited program over the run's recorded journal without performing anything,
to the first step the journal does not settle, and report what changed:

  admissible or not, and how many recorded steps the edited program accounts for;
  a divergence (L5001): a recorded step whose inputs the edit changes;
  each orphan, a recorded step the edit no longer reaches, with its verdict: a sleep,
  wait, monitor, ask or scope is ignored, a turn kept; rejected are a spawn (L5003), a
  resolved checkpoint (L5004, a person's decision), a notify whose notices were not all
  carried (L5013), an open conclave (L5014), any other kind (L5015).

Exit 0 when admissible, 1 when not. The check only reads: committing a migration is not
supported yet, so --adopt, --release and --discard-approvals are refused by name.`,
		Example: `  cotal run migrate run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local --file resolve-issue.v2.cotal.js
  cotal run migrate run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local --file resolve-issue.v2.cotal.js --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runstore.CheckID("run id", args[0]); err != nil {
				return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
			}
			for flag, set := range map[string]bool{"--adopt": o.Adopt != "", "--release": o.Release != "", "--discard-approvals": o.DiscardApprovals} {
				if set {
					return cmdutil.FlagErrorf("%s decides what a committed migration does with an orphan, and migrate only checks; nothing was written", flag)
				}
			}
			if o.File == "" {
				return cmdutil.FlagErrorf("give the edited program with --file")
			}
			if !o.Local {
				return cmdutil.RefuseUsage("a migration check on the manager",
					"the manager serves no migration check; the check reads the run from this terminal", "cotal run migrate "+args[0]+" --local --file "+cmdutil.ShellQuote(o.File))
			}
			return runMigrate(cmd.Context(), o, args[0])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.File, "file", "", "the edited program, a *.cotal.js file")
	cmd.Flags().BoolVar(&o.Local, "local", false, "read the run from this terminal (required)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as one JSON document")
	cmd.Flags().StringVar(&o.Adopt, "adopt", "", "refused: committing a migration is not supported yet")
	cmd.Flags().StringVar(&o.Release, "release", "", "refused: committing a migration is not supported yet")
	cmd.Flags().BoolVar(&o.DiscardApprovals, "discard-approvals", false, "refused: committing a migration is not supported yet")
	return cmd
}

func runMigrate(ctx context.Context, o *Options, runID string) error {
	src, err := cmdutil.UserFile{Flag: "--file", Path: o.File, Kind: "a Cotal Lang program", Max: MaxProgramSize, Stdin: o.IO.In}.Read()
	if err != nil {
		return err
	}
	prog, err := lang.Compile(string(src))
	var refused *lang.RefusedError
	if errors.As(err, &refused) {
		for _, p := range refused.Problems {
			fmt.Fprintf(o.IO.ErrOut, "%s: %s\n", o.File, cmdutil.OneLine(p.String()))
		}
		return cmdutil.Refuse("the program "+o.File, fmt.Sprintf("it has %s (listed above); fix them and check again", cmdutil.Count(len(refused.Problems), "problem")), "")
	}
	if err != nil {
		return err
	}
	sp, closeFn, err := o.space(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	rep, err := sp.Migrate(ctx, runID, prog)
	if errors.Is(err, runstore.ErrNoRecord) {
		return cmdutil.Refuse("run "+runID, "the space has no record of it", "cotal run ps")
	}
	if err != nil {
		return err
	}
	if o.JSON {
		if err := cmdutil.WriteJSON(o.IO.Out, rep); err != nil {
			return err
		}
	} else {
		verdict := "admissible"
		if !rep.Admissible {
			verdict = "not admissible"
		}
		fmt.Fprintf(o.IO.Out, "run %s: %s — the edited program accounts for %s; moves to %s\n",
			runID, verdict, cmdutil.Count(rep.ConsumedThrough, "journal step"), rep.ToHash)
		for _, x := range rep.Orphans {
			code := ""
			if x.Code != "" {
				code = " (" + x.Code + ")"
			}
			fmt.Fprintf(o.IO.Out, "  orphan  %s  %s  %s%s\n          %s\n", cmdutil.OneLine(x.Step), x.Kind, x.Verdict, code, x.Why)
		}
		if d := rep.Divergence; d != nil {
			fmt.Fprintf(o.IO.Out, "  divergence (L5001)  %s: recorded input %s, edited program hashes %s\n", cmdutil.OneLine(d.Step), d.RecordedHash, d.ProgramHash)
		}
		if rep.Fault != "" {
			fmt.Fprintf(o.IO.Out, "  the edited program fails: %s\n", cmdutil.OneLine(rep.Fault))
		}
		fmt.Fprintln(o.IO.Out, "nothing was written: committing a migration is not supported yet")
	}
	if !rep.Admissible {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}
