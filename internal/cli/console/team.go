package console

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/taskboard"
)

// taskGlyph draws each task status; its colour repeats it.
var taskGlyph = map[string]string{
	taskboard.Open: "○", taskboard.Claimed: "◔", taskboard.Working: "●", taskboard.Blocked: "◐",
	taskboard.Done: "✓", taskboard.Failed: "✗", taskboard.Cancelled: "–",
}

// taskColour is the SGR foreground of each task status.
var taskColour = map[string]string{
	taskboard.Open: "34", taskboard.Claimed: "32", taskboard.Working: "32", taskboard.Blocked: "33",
	taskboard.Done: "90", taskboard.Failed: "31", taskboard.Cancelled: "90",
}

// who names a principal by its display name in the roster, with the id.
func (t *tui) who(id string) string {
	if name := t.model.Name(id); name != "" && name != id {
		return termsafe.Escape(name) + " (" + termsafe.Escape(id) + ")"
	}
	return termsafe.Escape(id)
}

// span is a duration from unix ms a to b, whole seconds.
func span(a, b int64) string { return age(max(0, b-a)) }

// taskLines is the task board lens: unfinished tasks first, then finished ones, the most
// recently updated first in each; search (/) matches id, title, status, role and holder.
func (t *tui) taskLines() []string {
	now := t.now().UnixMilli()
	tasks := t.model.Tasks()
	slices.SortStableFunc(tasks, func(a, b meshview.Task) int {
		fa, fb := taskboard.Terminal(a.Status), taskboard.Terminal(b.Status)
		if fa != fb {
			if fa {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.Updated, a.Updated)
	})
	out := []string{"TASKS (unfinished first; / filters, e.g. /blocked)"}
	for _, k := range tasks {
		if !t.matchAny(k.ID, k.Title, k.Status, k.Role, k.Holder, k.Assignee) {
			continue
		}
		holder := "unheld"
		switch {
		case k.Holder != "":
			holder = "held by " + t.who(k.Holder)
		case k.Assignee != "":
			holder = "for " + t.who(k.Assignee)
		}
		line := fmt.Sprintf("%s %-9s %s  %s  %s", taskGlyph[k.Status], k.Status, k.ID, termsafe.Escape(k.Title), holder)
		if k.Role != "" {
			line += "  role " + termsafe.Escape(k.Role)
		}
		line += "  updated " + span(k.Updated, now) + " ago"
		if k.LeaseUntil > 0 {
			line += "  lease " + span(now, k.LeaseUntil)
		}
		out = append(out, style(taskColour[k.Status], line))
		if k.Note != "" {
			out = append(out, "    "+termsafe.Escape(strings.ReplaceAll(k.Note, "\n", " ")))
		}
	}
	return t.orEmpty(out, "no tasks on the board")
}

// claimLines is the file claims lens, by path; search (/) matches path, holder and reason.
func (t *tui) claimLines() []string {
	now := t.now().UnixMilli()
	out := []string{"FILE CLAIMS (by path)"}
	for _, c := range t.model.Claims() {
		if c.Expires <= now || !t.matchAny(c.Path, c.Holder, c.Name, c.Reason) {
			continue
		}
		mode := "shared"
		if c.Exclusive {
			mode = style("35", "exclusive")
		}
		holder := termsafe.Escape(c.Holder)
		if c.Name != "" {
			holder = termsafe.Escape(c.Name) + " (" + holder + ")"
		}
		line := fmt.Sprintf("%s  %s  %s  since %s ago  expires in %s", termsafe.Escape(c.Path), mode, holder, span(c.Since, now), span(now, c.Expires))
		if c.Reason != "" {
			line += `  "` + termsafe.Escape(c.Reason) + `"`
		}
		out = append(out, line)
	}
	return t.orEmpty(out, "no file claims")
}

// orEmpty adds a line saying the lens is empty, and why when the read failed.
func (t *tui) orEmpty(out []string, empty string) []string {
	if len(out) > 1 {
		return out
	}
	if t.teamErr != nil {
		if err := t.teamErr(); err != nil {
			return append(out, "not read: "+termsafe.Escape(err.Error()))
		}
	}
	return append(out, empty)
}

// matchAny reports whether the search is empty or found in any of fields.
func (t *tui) matchAny(fields ...string) bool {
	if t.search == "" {
		return true
	}
	q := strings.ToLower(t.search)
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}
