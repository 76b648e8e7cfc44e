package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/runstore"
)

// Runs is what the console reads and answers of the space's workflow runs
// (runstore.Space is one).
type Runs interface {
	Runs(ctx context.Context) ([]runstore.RunRow, error)
	Pending(ctx context.Context) ([]runstore.Pause, error)
	Answer(ctx context.Context, q runstore.AnswerRequest) (runstore.Filed, error)
}

// runsEvery is how often the runs lens reads the runs again while it is shown.
const runsEvery = 5 * time.Second

type (
	// runsMsg carries one read of the runs and their open checkpoints.
	runsMsg struct {
		rows   []runstore.RunRow
		pauses []runstore.Pause
		err    error
	}
	// runsTick asks for the next read while the runs lens is shown.
	runsTick struct{}
	// answeredMsg says how an answer typed in the runs lens went.
	answeredMsg struct {
		step string
		id   string
		err  error
	}
)

// runsState is the runs lens: the runs, the checkpoints waiting for a person, the one
// selected (j/k), and the answer being typed to it (a, Enter files it).
type runsState struct {
	runs      Runs
	by        string // who answers, recorded on the answer
	rows      []runstore.RunRow
	pauses    []runstore.Pause
	err       error
	sel       int
	answering bool
	value     string
}

func (t *tui) loadRuns() tea.Cmd {
	if t.runs.runs == nil {
		return nil
	}
	r := t.runs.runs
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rows, err := r.Runs(ctx)
		if err != nil {
			return runsMsg{err: err}
		}
		p, err := r.Pending(ctx)
		return runsMsg{rows: rows, pauses: p, err: err}
	}
}

func (t *tui) onRuns(m runsMsg) {
	t.runs.rows, t.runs.pauses, t.runs.err = m.rows, m.pauses, m.err
	if t.runs.sel >= len(t.runs.pauses) {
		t.runs.sel = max(0, len(t.runs.pauses)-1)
	}
}

// runsKey handles a key while the runs lens is shown; handled is false for keys it
// leaves to the rest of the console.
func (t *tui) runsKey(s, text string) (cmd tea.Cmd, handled bool) {
	rs := &t.runs
	if rs.answering {
		switch s {
		case "esc":
			rs.answering, rs.value = false, ""
		case "backspace":
			rs.value = trimLast(rs.value)
		case "enter":
			rs.answering = false
			if rs.sel >= len(rs.pauses) || rs.runs == nil {
				return nil, true
			}
			p, value := rs.pauses[rs.sel], strings.TrimSpace(rs.value)
			rs.value = ""
			if !json.Valid([]byte(value)) {
				t.status = "not answered: the answer is JSON; a bare string needs its quotes, \"yes\""
				return nil, true
			}
			t.status = "answering " + p.Step + "…"
			r, by := rs.runs, rs.by
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				a, err := r.Answer(ctx, runstore.AnswerRequest{Run: p.RunID, Step: p.Step, Value: json.RawMessage(value), By: by})
				return answeredMsg{step: p.Step, id: a.AnswerID, err: err}
			}, true
		default:
			rs.value += text
		}
		return nil, true
	}
	switch s {
	case "j", "down":
		rs.sel = min(rs.sel+1, max(0, len(rs.pauses)-1))
	case "k", "up":
		rs.sel = max(0, rs.sel-1)
	case "a":
		rs.answering = len(rs.pauses) > 0 && rs.runs != nil
	default:
		return nil, false
	}
	return nil, true
}

// runsLines draws the runs lens: the checkpoints waiting for an answer, then every run.
// What a run's program asks is peer text: escaped.
func (t *tui) runsLines(w int) []string {
	rs := &t.runs
	out := []string{style("1", "CHECKPOINTS WAITING FOR YOU") + style("90", "  (j/k select · a answer · Enter files it)")}
	switch {
	case rs.runs == nil:
		why := "this console does not read workflow runs"
		if rs.err != nil {
			why += ": " + rs.err.Error()
		}
		return append(out, "  "+termsafe.Escape(why))
	case rs.err != nil:
		out = append(out, "  not read: "+termsafe.Escape(rs.err.Error()))
	case len(rs.pauses) == 0:
		out = append(out, "  none")
	}
	now := t.now().UnixMilli()
	for i, p := range rs.pauses {
		mark := "  "
		if i == rs.sel {
			mark = style("1", "▸ ")
		}
		line := fmt.Sprintf("%s%s %s  %s", mark, termsafe.Escape(clip(p.RunID, 16)), termsafe.Escape(p.Step), style("33", termsafe.Escape(clip(p.Asks, max(10, w-50)))))
		if p.Since > 0 {
			line += style("90", " waiting "+age(now-p.Since))
		}
		out = append(out, line)
	}
	out = append(out, "", style("1", "RUNS"))
	if len(rs.rows) == 0 && rs.err == nil {
		out = append(out, "  no workflow runs")
	}
	for _, r := range rs.rows {
		high := "-"
		if r.JournalHigh != nil {
			high = fmt.Sprint(*r.JournalHigh)
		}
		out = append(out, fmt.Sprintf("  %s  %-9s  %s  journal %s", termsafe.Escape(r.RunID), termsafe.Escape(r.ShownState()), termsafe.Escape(clip(r.Holder, 24)), high))
	}
	return out
}
