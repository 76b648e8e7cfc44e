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
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// TestTUIRendersTheSpace drives the console's UI model with a watcher on a real broker:
// the roster and a new message render, and n shows the waiting agent.
func TestTUIRendersTheSpace(t *testing.T) {
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
	connect := func(name string, kind string) *client.Endpoint {
		ep, err := client.Connect(t.Context(), srv.ClientURL(), client.Config{Space: "main", Name: name, Kind: kind, Role: "dev", Logger: brokertest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		return ep
	}
	observer := connect("console", protocol.CardEndpoint)
	model := meshview.New(meshview.Config{})
	events, stop := model.Subscribe()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- (&meshview.Watcher{Endpoint: observer, Model: model, DMs: true}).Run(ctx, func() { close(ready) })
	}()
	defer func() { cancel(); <-done }()
	<-ready

	ui := &tui{model: model, events: events, dms: true, now: time.Now}
	ui.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	// pump applies model events to the UI until cond holds on the rendered screen.
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

	alice := connect("alice", "")
	bob := connect("bob", "")
	for _, ep := range []*client.Endpoint{alice, bob} {
		if err := ep.Join(t.Context(), "team"); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.SetStatus(t.Context(), protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	pump("the roster", func(s string) bool {
		return strings.Contains(s, "◐ alice (dev)") && strings.Contains(s, "○ bob (dev)") && strings.Contains(s, "1 waiting")
	})
	if strings.Contains(ui.render(), "console (") {
		t.Fatal("the observer is in the roster")
	}

	if _, err := bob.Post(t.Context(), "team", client.Text("build is green \x1b[2J")); err != nil {
		t.Fatal(err)
	}
	screen := pump("bob's message", func(s string) bool { return strings.Contains(s, "[#team] bob: build is green") })
	if strings.Contains(screen, "\x1b[2J") {
		t.Fatal("a peer's escape sequence reached the screen raw")
	}

	ui.Update(tea.KeyPressMsg{Code: 'n', Text: "n"})
	screen = ui.render()
	if !strings.Contains(screen, "NEEDS YOU") || !strings.Contains(screen, "◐ alice waiting") {
		t.Fatalf("n: no waiting agent on screen:\n%s", screen)
	}
	ui.Update(tea.KeyPressMsg{Code: 'n', Text: "n"})
	ui.Update(tea.KeyPressMsg{Code: '1', Text: "1"})
	if screen = ui.render(); !strings.Contains(screen, "[1 #team]") || !strings.Contains(screen, "build is green") {
		t.Fatalf("tab 1: #team not selected:\n%s", screen)
	}
	ui.Update(tea.KeyPressMsg{Code: '/', Text: "/"})
	for _, r := range "zzz" {
		ui.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	ui.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if screen = ui.render(); strings.Contains(screen, "build is green") || !strings.Contains(screen, "filter: zzz") {
		t.Fatalf("search zzz still shows the message:\n%s", screen)
	}
}
