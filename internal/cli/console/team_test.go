package console

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
)

// TestTUIShowsTasksAndClaims drives the console's UI with a team watcher on a real
// broker: t shows the board with who holds each task and follows a change live, c shows
// the file claims, / filters, and a title's terminal escape never reaches the screen raw.
func TestTUIShowsTasksAndClaims(t *testing.T) {
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := provision.Space(t.Context(), js, "main", provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatal(err)
	}
	alice := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	ab, err := taskboard.Connect(t.Context(), nc, "main", alice, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bb, err := taskboard.Connect(t.Context(), nc, "main", bob, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, err := ab.Create(t.Context(), taskboard.TaskRow{Title: "ship the console \x1b[2J\x1b]0;pwned\x07", Role: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bb.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ab.Create(t.Context(), taskboard.TaskRow{Title: "write the docs"}); err != nil {
		t.Fatal(err)
	}

	model := meshview.New(meshview.Config{})
	events, stop := model.Subscribe()
	defer stop()
	obs, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	team := &meshview.TeamWatcher{Conn: obs, Space: "main", Model: model}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- team.Run(ctx, func() { close(ready) }) }()
	defer func() { cancel(); <-done }()
	<-ready

	ui := &tui{model: model, events: events, now: time.Now, teamErr: team.Err}
	ui.Update(tea.WindowSizeMsg{Width: 200, Height: 30})
	pump := func(what string, cond func(screen string) bool) string {
		t.Helper()
		deadline := time.After(15 * time.Second) // a hang guard only
		for {
			if s := ui.render(); cond(s) {
				return s
			}
			select {
			case ev := <-events:
				ui.Update(eventMsg(ev))
			case <-deadline:
				t.Fatalf("%s: not on screen:\n%s", what, ui.render())
			}
		}
	}

	ui.Update(tea.KeyPressMsg{Code: 't', Text: "t"})
	screen := pump("the board", func(s string) bool {
		return strings.Contains(s, "TASKS") && strings.Contains(s, "claimed   "+task.ID+"  ship the console") &&
			strings.Contains(s, "held by local.bob") && strings.Contains(s, "write the docs  unheld")
	})
	if strings.Contains(screen, "\x1b[2J") || strings.Contains(screen, "\x1b]0;") {
		t.Fatal("a task title's escape sequence reached the screen raw")
	}
	if _, err := bb.Update(t.Context(), task.ID, taskboard.Blocked, "waiting on review"); err != nil {
		t.Fatal(err)
	}
	pump("the update", func(s string) bool {
		return strings.Contains(s, "blocked   "+task.ID) && strings.Contains(s, "waiting on review")
	})
	ui.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
	for _, r := range "blocked" {
		ui.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	ui.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if screen = ui.render(); !strings.Contains(screen, task.ID) || strings.Contains(screen, "write the docs") {
		t.Fatalf("/blocked:\n%s", screen)
	}
	ui.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
	ui.Update(tea.KeyPressMsg{Code: tea.KeyEnter}) // an empty search clears the filter

	ui.Update(tea.KeyPressMsg{Code: 'c', Text: "c"})
	if screen = ui.render(); !strings.Contains(screen, "no file claims") {
		t.Fatalf("c before any claim:\n%s", screen)
	}
	st := &claims.Store{JS: js, Space: "main", Holder: alice, Name: "alice"}
	if _, err := st.Claim(t.Context(), claims.Request{Paths: []string{"internal/cli/console"}, TTL: time.Hour, Exclusive: true, Reason: "lenses \x1b[31m"}); err != nil {
		t.Fatal(err)
	}
	screen = pump("the claim", func(s string) bool {
		return strings.Contains(s, "internal/cli/console") && strings.Contains(s, "exclusive") && strings.Contains(s, "alice (local.alice)") &&
			strings.Contains(s, "expires in")
	})
	if strings.Contains(screen, "\x1b[31m") {
		t.Fatal("a claim reason's escape sequence reached the screen raw")
	}
}
