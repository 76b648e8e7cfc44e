package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/runstore"
)

// space connects and answers the space's runs.
func (o *Options) space(ctx context.Context) (*runstore.Space, func(), error) {
	js, space, closeFn, err := o.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &runstore.Space{JS: js, Name: space, Now: func() int64 { return time.Now().UnixMilli() }}, closeFn, nil
}

func newCmdPs(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "ps [--json]",
		Short: "List the space's workflow runs",
		Long: `List every run in the space's records: its state, holder, journal high mark and the run
it was forked from. A revoked run shows STATE revoked (who revoked it and why are printed
under the table); a run whose revocation marker cannot be read shows unchecked, and ps
then exits 1. --json prints one JSON object per run (one line each).`,
		Example: "  cotal run ps\n  cotal run ps --json",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runPs(cmd.Context(), o) },
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per run, one per line")
	return cmd
}

func runPs(ctx context.Context, o *Options) error {
	sp, closeFn, err := o.space(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	rows, err := sp.Runs(ctx)
	if err != nil {
		return err
	}
	unchecked := 0
	for _, r := range rows {
		if r.RevocationUnreadable != "" {
			unchecked++
			fmt.Fprintf(o.IO.ErrOut, "%s/%s: revocation marker could not be read (%s); its record reads %s\n",
				r.Endpoint, r.RunID, cmdutil.OneLine(r.RevocationUnreadable), dash(r.State))
		}
	}
	if o.JSON {
		for _, r := range rows {
			if err := cmdutil.WriteJSONLine(o.IO.Out, r); err != nil {
				return err
			}
		}
	} else {
		printRuns(o, sp.Name, rows)
	}
	if unchecked > 0 {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

func printRuns(o *Options, space string, rows []runstore.RunRow) {
	if len(rows) == 0 {
		fmt.Fprintf(o.IO.Out, "no workflow runs recorded in space %s; cotal run start --file F starts one (the manager drives it; --local drives it here)\n", space)
		return
	}
	table := [][]string{{"RUN", "ENDPOINT", "STATE", "HOLDER", "JOURNAL", "FORKED-FROM"}}
	for _, r := range rows {
		high, fork := "-", "-"
		if r.JournalHigh != nil {
			high = strconv.FormatInt(*r.JournalHigh, 10)
		}
		if r.ForkedFrom != nil {
			fork = r.ForkedFrom.Run + "@" + r.ForkedFrom.Step
		}
		table = append(table, []string{r.RunID, r.Endpoint, r.ShownState(), dash(r.Holder), high, fork})
	}
	widths := make([]int, len(table[0]))
	for _, row := range table {
		for i, c := range row {
			row[i] = cmdutil.OneLine(c)
			widths[i] = max(widths[i], len(row[i]))
		}
	}
	for _, row := range table {
		line := ""
		for i, c := range row {
			if i == len(row)-1 {
				line += c
				continue
			}
			line += fmt.Sprintf("%-*s  ", widths[i], c)
		}
		fmt.Fprintln(o.IO.Out, line)
	}
	for _, r := range rows {
		if r.Revoked != nil {
			fmt.Fprintf(o.IO.Out, "%s/%s: revoked by %s (%s); the status record is left as its driver last wrote it\n",
				r.Endpoint, r.RunID, cmdutil.OneLine(r.Revoked.By), cmdutil.OneLine(r.Revoked.Reason))
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// JournalRow is one journal record in `cotal run journal --json`: the reference's row,
// and on a settled checkpoint the answers filed to it (the accepted one, then any
// amendments, in store order).
type JournalRow struct {
	runstore.JournalRow
	Answers []runstore.Answer `json:"answers,omitempty"`
}

func newCmdJournal(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "journal RUN [--json]",
		Short: "Show a run's journal: activations and steps, pending or settled",
		Long: `Show the run's status, then every record of its journal in order: each activation (who
took the run, under which epoch, after replaying to which stream sequence) and each step
entry (its key and outcome: pending, resolved or expired for a checkpoint, ok, failed
(code), refused (code)). A checkpoint waiting for an answer shows what it asks: answer it
with cotal run answer. A settled checkpoint shows the answer it acted on and any
amendments filed after (cotal run amend). --json prints one JSON object per record.`,
		Example: "  cotal run journal run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f\n  cotal run journal run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runstore.CheckID("run id", args[0]); err != nil {
				return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
			}
			return runJournal(cmd.Context(), o, args[0])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per journal record, one per line")
	return cmd
}

func runJournal(ctx context.Context, o *Options, runID string) error {
	sp, closeFn, err := o.space(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	v, err := sp.View(ctx, runID)
	if errors.Is(err, runstore.ErrNoRecord) {
		return cmdutil.Refuse("run "+runID, "the space has no record of it", "cotal run ps")
	}
	if err != nil {
		return err
	}
	st := "(no status)"
	if v.Status != nil {
		st = fmt.Sprintf("%s, holder %s, epoch %d", v.Status.State, cmdutil.OneLine(v.Status.Holder), v.Status.Epoch)
	}
	header := o.IO.Out
	if o.JSON {
		header = o.IO.ErrOut // stdout holds the rows alone
	}
	fmt.Fprintf(header, "run %s on %s: %s\n", runID, v.Endpoint, st)
	for _, r := range v.Journal {
		row := JournalRow{JournalRow: r}
		if r.Kind == runstore.KindStep && r.State == "settled" && r.Outcome == "resolved" {
			if row.Answers, err = sp.Answers(ctx, runID, r.Step); err != nil {
				return err
			}
		}
		if o.JSON {
			if err := cmdutil.WriteJSONLine(o.IO.Out, row); err != nil {
				return err
			}
			continue
		}
		printJournalRow(o, row)
	}
	return nil
}

func printJournalRow(o *Options, r JournalRow) {
	if r.Kind == runstore.KindActivation {
		fmt.Fprintf(o.IO.Out, "#%d  activation  holder=%s epoch=%d replayedTo=%d\n", r.N, cmdutil.OneLine(r.Holder), deref(r.Epoch), deref(r.ReplayedTo))
		return
	}
	fmt.Fprintf(o.IO.Out, "#%d  step        %s  %s\n", r.N, cmdutil.OneLine(r.Step), r.Outcome)
	if r.Asks != "" {
		to := ""
		if r.Addressee != "" {
			to = "  (escalates to " + cmdutil.OneLine(r.Addressee) + ")"
		}
		fmt.Fprintf(o.IO.Out, "      asks %s%s\n", cmdutil.OneLine(r.Asks), to)
	}
	for _, a := range r.Answers {
		verb := "answered"
		if a.Supersedes != "" {
			verb = "amended "
		}
		fmt.Fprintf(o.IO.Out, "      %s value=%s by=%s answerId=%s\n", verb, cmdutil.OneLine(shortJSON(a.Value)), cmdutil.OneLine(a.By), a.AnswerID)
	}
}

// shortJSON bounds a value shown on one journal line.
func shortJSON(v json.RawMessage) string {
	const most = 120
	if len(v) > most {
		return strings.ToValidUTF8(string(v[:most]), "") + "…"
	}
	return string(v)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
