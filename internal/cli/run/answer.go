package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// MaxValueSize bounds an answer's value.
const MaxValueSize = 64 << 10

// AnswerReport is what `cotal run answer --json` prints.
type AnswerReport struct {
	Token    string `json:"token"`
	AnswerID string `json:"answerId"`
	Settle   string `json:"settle"` // filed: the run's driver settles the step when it reads it
}

func newCmdAnswer(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "answer RUN STEP --value JSON [--by NAME] [--json]",
		Short: "Answer a run's checkpoint that waits for a person",
		Long: `File the answer to a pending checkpoint of a run (STEP is its key as cotal run journal
shows it, such as /checkpoint:approve#0). --value is JSON: a bare string needs its quotes,
--value '"yes"'. The answer is a create-only record in the space's records bucket; the
run's driver (now, or the next one to resume it) settles the checkpoint with it. A
checkpoint already answered, settled or not waiting is refused and nothing is written.`,
		Example: `  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:approve#0 --value '"yes"'
  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:issue#0 --value '{"issue":42}' --by alice`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runstore.CheckID("run id", args[0]); err != nil {
				return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
			}
			if o.Value == "" {
				return cmdutil.FlagErrorf("give the answer with --value JSON (a bare string needs quotes: --value '\"yes\"')")
			}
			if len(o.Value) > MaxValueSize || !json.Valid([]byte(o.Value)) {
				return cmdutil.FlagErrorf("--value %s is not JSON of at most %d bytes; a bare string needs quotes: --value '\"yes\"'", cmdutil.OneLine(o.Value), MaxValueSize)
			}
			if o.By == "" || len(o.By) > 128 || !utf8.ValidString(o.By) {
				return cmdutil.FlagErrorf("--by: give who answers, at most 128 bytes")
			}
			return runAnswer(cmd.Context(), o, args[0], args[1])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.Value, "value", "", "the answer, as JSON")
	cmd.Flags().StringVar(&o.By, "by", "operator", "who answers, recorded on the answer")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON document")
	return cmd
}

func runAnswer(ctx context.Context, o *Options, runID, step string) error {
	js, space, closeFn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	recs, err := runstore.OpenRecords(ctx, js, space)
	if err != nil {
		return err
	}
	journal, _, err := runstore.Replay(ctx, js, space, runID)
	if err != nil {
		return err
	}
	if len(journal) == 0 {
		return cmdutil.Refuse("run "+runID, "its journal is empty or it does not exist", "cotal run ps")
	}
	var entry *runstore.Entry
	for _, r := range journal {
		if r.Entry != nil && r.Entry.Key() == step {
			entry = r.Entry
		}
	}
	switch {
	case entry == nil:
		return cmdutil.Refuse("step "+cmdutil.OneLine(step), "run "+runID+" has not reached it", "cotal run journal "+runID)
	case entry.Kind != "checkpoint":
		return cmdutil.Refuse("step "+cmdutil.OneLine(step), "it is a "+entry.Kind+", not a checkpoint; only a checkpoint is answered", "")
	case entry.State != "pending":
		return cmdutil.Refuse("step "+cmdutil.OneLine(step), "it is settled already", "cotal run journal "+runID)
	}
	token := rundriver.Token(*entry)
	prior, err := recs.Answers(ctx, runstore.DefaultEndpoint, token)
	if err != nil {
		return err
	}
	for _, a := range prior {
		if a.Supersedes == "" {
			return cmdutil.Refuse("step "+cmdutil.OneLine(step), "it was answered already by "+cmdutil.OneLine(a.By)+" (answer "+a.AnswerID+"), and the run acts on the first answer", "")
		}
	}
	var value any
	if err := json.Unmarshal([]byte(o.Value), &value); err != nil {
		return cmdutil.FlagErrorf("--value: %v", err)
	}
	id, err := runstore.AnswerID(token, o.By, value, "")
	if err != nil {
		return cmdutil.FlagErrorf("--value: %v", err)
	}
	a := runstore.Answer{V: 1, Token: token, AnswerID: id, Value: json.RawMessage(o.Value), By: o.By, At: time.Now().UnixMilli()}
	if err := recs.Create(ctx, runstore.AnswerKey(runstore.DefaultEndpoint, token, id), a); err != nil {
		if errors.Is(err, runstore.ErrConflict) {
			return cmdutil.Refuse("step "+cmdutil.OneLine(step), "this answer was filed already", "")
		}
		return err
	}
	rep := AnswerReport{Token: token, AnswerID: id, Settle: "filed"}
	if o.JSON {
		return cmdutil.WriteJSON(o.IO.Out, rep)
	}
	fmt.Fprintf(o.IO.Out, "answered %s of run %s (answer %s); its driver settles the step\n", cmdutil.OneLine(step), runID, id)
	return nil
}
