package a2agw

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/taskboard"
)

// The task board mirror: a caller's task for a role is also a task on the space's board
// (Config.Board), so the team sees the work A2A callers asked of its roles. The gateway
// creates it and holds it (its own principal writes the claim and status rows, as the
// board's rules require) while the role works, and ends it as the A2A task ends:
// completed is done, failed failed, canceled cancelled. A board that cannot be written
// never fails the A2A task: the gateway logs it and goes on.

// boardTitle is a board task's title from the caller's text: its first line, trimmed to
// the board's title limit; "A2A task" when it has no text.
func boardTitle(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, line))
	if line == "" {
		return "A2A task"
	}
	const prefix = "A2A: "
	limit := taskboard.MaxTitle - len(prefix)
	if len(line) > limit {
		cut := limit - len("…")
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = strings.TrimSpace(line[:cut]) + "…"
	}
	return prefix + line
}

// boardBody is a board task's body: the caller's text, bounded by the board's limit.
func boardBody(text, taskID string) string {
	body := "A2A task " + taskID + " (cotal a2a)\n\n" + text
	if len(body) > taskboard.MaxBody {
		cut := taskboard.MaxBody
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		body = body[:cut]
	}
	return body
}

// openBoardTask creates and claims the board task of a role task; "" when there is no
// board or it could not be written.
func (g *Gateway) openBoardTask(ctx context.Context, role, taskID, text string) string {
	b := g.cfg.Board
	if b == nil {
		return ""
	}
	t, err := b.Create(ctx, taskboard.TaskRow{Title: boardTitle(text), Body: boardBody(text, taskID), Role: role})
	if err == nil {
		_, err = b.Claim(ctx, t.ID)
	}
	if err == nil {
		_, err = b.Update(ctx, t.ID, taskboard.Working, "asked of role "+role+" for A2A task "+taskID)
	}
	if err != nil {
		g.log.Warn("a2a gateway: the task board does not show this task", "task", taskID, "role", role, "err", err)
		if t.ID == "" {
			return ""
		}
	}
	return t.ID
}

// boardStatus is the board status an ended A2A task sets; "" while it goes on.
func boardStatus(state string) string {
	switch state {
	case StateCompleted:
		return taskboard.Done
	case StateFailed:
		return taskboard.Failed
	case StateCanceled:
		return taskboard.Cancelled
	}
	return ""
}

// closeBoardTask ends r's board task when r has ended. A claim that lapsed (a gateway
// stopped longer than the board's lease) is taken again first.
func (g *Gateway) closeBoardTask(ctx context.Context, r *record) {
	status := boardStatus(r.Task.Status.State)
	if g.cfg.Board == nil || r.BoardTask == "" || status == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	note := "A2A task " + r.Task.ID + " " + r.Task.Status.State
	if r.Replier != "" {
		note += "; answered by " + r.Replier
	}
	_, err := g.cfg.Board.Update(ctx, r.BoardTask, status, note)
	if errors.Is(err, taskboard.ErrNotYours) {
		if _, err = g.cfg.Board.Claim(ctx, r.BoardTask); err == nil {
			_, err = g.cfg.Board.Update(ctx, r.BoardTask, status, note)
		}
	}
	if err != nil && !errors.Is(err, taskboard.ErrFinished) {
		g.log.Warn("a2a gateway: the board task was not ended", "task", r.Task.ID, "board", r.BoardTask, "err", err)
	}
}

// renewBoard keeps the claims on the board tasks the gateway holds alive (each a role
// still works on) until ctx ends.
func (g *Gateway) renewBoard(ctx context.Context) {
	b := g.cfg.Board
	if b == nil {
		return
	}
	b.RenewEvery(ctx, nil, func(err error) { g.log.Warn("a2a gateway: renew board claims", "err", err) })
}
