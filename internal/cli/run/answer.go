package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/runstore"
)

// MaxValueSize bounds an answer's value.
const MaxValueSize = runstore.MaxAnswerValue

// AnswerReport is what `cotal run answer --json` prints.
type AnswerReport struct {
	Token    string `json:"token"`
	AnswerID string `json:"answerId"`
	Settle   string `json:"settle"` // filed: the run's driver settles the step when it reads it; resumed: the checkpoint plane settled
}

// AmendReport is what `cotal run amend --json` prints.
type AmendReport struct {
	Token      string `json:"token"`
	AnswerID   string `json:"answerId"`
	Supersedes string `json:"supersedes"`
}

func answerArgs(o *Options, args []string) error {
	if err := runstore.CheckID("run id", args[0]); err != nil {
		return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
	}
	if o.Value == "" && o.Artifact == "" {
		return cmdutil.FlagErrorf("give the answer with --value JSON (a bare string needs quotes: --value '\"yes\"'), --artifact REF, or both")
	}
	if len(o.Artifact) > runstore.MaxArtifact || strings.ContainsFunc(o.Artifact, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return cmdutil.FlagErrorf("--artifact %s: want at most %d bytes of printable text, such as sha256:<hex> of what you reviewed", cmdutil.OneLine(o.Artifact), runstore.MaxArtifact)
	}
	if o.Value != "" && (len(o.Value) > MaxValueSize || !json.Valid([]byte(o.Value))) {
		return cmdutil.FlagErrorf("--value %s is not JSON of at most %d bytes; a bare string needs quotes: --value '\"yes\"'", cmdutil.OneLine(o.Value), MaxValueSize)
	}
	if o.By == "" || len(o.By) > runstore.MaxBy {
		return cmdutil.FlagErrorf("--by: give who answers, at most %d bytes", runstore.MaxBy)
	}
	return nil
}

func newCmdAnswer(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "answer RUN STEP (--value JSON | --artifact REF) [--by NAME] [--json]",
		Short: "Answer a run's checkpoint that waits for a person",
		Long: `File the answer to a pending checkpoint of a run (STEP is its key as cotal run journal
shows it, such as /checkpoint:approve#0). --value is JSON: a bare string needs its quotes,
--value '"yes"'. --artifact records what the answer was given on (the digest of what
you reviewed, such as sha256:<hex>); the program sees it as the checkpoint's artifact. An
answer needs a value, an artifact or both. The answer is a create-only record in the
space's records bucket; the
run's driver (now, or the next one to resume it) settles the checkpoint with it. A
checkpoint already answered, settled or not waiting is refused and nothing is written.
The same answer can be given from cotal web (NEEDS YOU) and cotal console.`,
		Example: `  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:approve#0 --value '"yes"'
  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:issue#0 --value '{"issue":42}' --by alice
  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:approve#0 --value '"yes"' --artifact sha256:$(sha256sum plan.md | cut -c1-64)`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := answerArgs(o, args); err != nil {
				return err
			}
			return runAnswer(cmd.Context(), o, args[0], args[1])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Value, "value", "", "the answer, as JSON")
	cmd.Flags().StringVar(&o.Artifact, "artifact", "", "a reference to what the answer was given on (e.g. sha256:<hex>)")
	cmd.Flags().StringVar(&o.By, "by", "operator", "who answers, recorded on the answer")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON document")
	return cmd
}

// AnswerRefusal turns a refused answer or amendment into the sentence the CLI, the
// dashboard and the console give; nil when err is not a refusal.
func AnswerRefusal(err error, runID, step string) error {
	s := "step " + cmdutil.OneLine(step)
	switch {
	case errors.Is(err, runstore.ErrNoJournal):
		return cmdutil.Refuse("run "+runID, "its journal is empty or it does not exist", "cotal run ps")
	case errors.Is(err, runstore.ErrNoRecord):
		return cmdutil.Refuse("run "+runID, "the space has no record of it", "cotal run ps")
	case errors.Is(err, runstore.ErrNotReached):
		return cmdutil.Refuse(s, "run "+runID+" has not reached it", "cotal run journal "+runID)
	case errors.Is(err, runstore.ErrNotCheckpoint):
		return cmdutil.Refuse(s, "it is not a checkpoint; only a checkpoint is answered", "")
	case errors.Is(err, runstore.ErrSettled):
		return cmdutil.Refuse(s, "it is settled already", "cotal run journal "+runID)
	case errors.Is(err, runstore.ErrAnswered):
		return cmdutil.Refuse(s, "it was answered already ("+cmdutil.OneLine(err.Error())+")", "")
	case errors.Is(err, runstore.ErrNotSettled):
		return cmdutil.Refuse(s, "it has no accepted answer to amend (only a resolved checkpoint is amended; a pending one is answered)", "cotal run journal "+runID)
	case errors.Is(err, runstore.ErrBadAnswer):
		return cmdutil.FlagErrorf("--value: %v", err)
	}
	return nil
}

func runAnswer(ctx context.Context, o *Options, runID, step string) error {
	sp, closeFn, err := o.space(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := sp.Answer(ctx, runstore.AnswerRequest{Run: runID, Step: step, Value: rawOrNil(o.Value), Artifact: o.Artifact, By: o.By})
	if err != nil {
		if r := AnswerRefusal(err, runID, step); r != nil {
			return r
		}
		return err
	}
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, AnswerReport{Token: a.Token, AnswerID: a.AnswerID, Settle: a.Settle})
	}
	how := "its driver settles the step"
	if a.Settle == runstore.CheckpointResumed {
		how = "the checkpoint is resumed (its settle fact is published)"
	}
	fmt.Fprintf(o.IO.Out, "answered %s of run %s (answer %s); %s\n", cmdutil.OneLine(step), runID, a.AnswerID, how)
	return nil
}

func newCmdAmend(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "amend RUN STEP (--value JSON | --artifact REF) [--by NAME] [--json]",
		Short: "File an amendment beside a settled checkpoint's accepted answer",
		Long: `File a new answer beside the answer a settled checkpoint acted on: a create-only
answer record with a fresh id that supersedes the accepted one. The run keeps the answer
it acted on (nothing is replayed); cotal run journal lists the amendments under the step,
in the order they were filed. A checkpoint still pending is answered, not amended.`,
		Example: `  cotal run amend run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:issue#0 --value '{"issue":43}' --by alice`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := answerArgs(o, args); err != nil {
				return err
			}
			return runAmend(cmd.Context(), o, args[0], args[1])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Value, "value", "", "the amended answer, as JSON")
	cmd.Flags().StringVar(&o.Artifact, "artifact", "", "a reference to what the amendment was given on (e.g. sha256:<hex>)")
	cmd.Flags().StringVar(&o.By, "by", "operator", "who amends, recorded on the amendment")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON document")
	return cmd
}

func runAmend(ctx context.Context, o *Options, runID, step string) error {
	sp, closeFn, err := o.space(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := sp.Amend(ctx, runstore.AnswerRequest{Run: runID, Step: step, Value: rawOrNil(o.Value), Artifact: o.Artifact, By: o.By})
	if err != nil {
		if r := AnswerRefusal(err, runID, step); r != nil {
			return r
		}
		return err
	}
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, AmendReport{Token: a.Token, AnswerID: a.AnswerID, Supersedes: a.Supersedes})
	}
	fmt.Fprintf(o.IO.Out, "amended %s of run %s (answer %s supersedes %s); the run keeps the answer it acted on\n",
		cmdutil.OneLine(step), runID, a.AnswerID, a.Supersedes)
	return nil
}

// rawOrNil is flag text as JSON, nil when the flag was not given.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}
