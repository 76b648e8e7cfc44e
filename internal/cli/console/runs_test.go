package console

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// The runs lens (r) lists a run waiting at a checkpoint, with what it asks escaped; an
// answer that is not JSON is refused on the console and files nothing; a JSON answer
// typed there (a, Enter) settles the run, recorded as the console's person.
func TestRunsLensAnswersACheckpoint(t *testing.T) {
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := provision.Space(t.Context(), js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	prog, run, err := rundriver.Prepare("const a = await checkpoint(\"approve\", \"Ship \\u001b[2J it?\");\nlog(\"answer \" + a.value + \" by \" + a.by);\n")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	waiting := make(chan struct{}, 1)
	cfg := rundriver.Config{JS: js, Space: "main", Log: func(_, l string) { mu.Lock(); logs = append(logs, l); mu.Unlock() },
		OnCheckpoint: func(string, string) { waiting <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan rundriver.Outcome, 1), make(chan struct{})
	go func() {
		defer close(finished)
		out, err := rundriver.Start(ctx, cfg, prog, run, "approve.cotal.js")
		if err != nil {
			t.Errorf("drive: %v", err)
		}
		done <- out
	}()
	defer func() { cancel(); <-finished }()
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never waited at its checkpoint")
	}

	sp := &runstore.Space{JS: js, Name: "main", Now: func() int64 { return time.Now().UnixMilli() }}
	ui := &tui{model: meshview.New(meshview.Config{}), now: time.Now, runs: runsState{runs: sp, by: "carol"}}
	ui.Update(tea.WindowSizeMsg{Width: 140, Height: 30})
	// do runs a command the UI answered and applies its message, as the program would.
	do := func(cmd tea.Cmd) {
		t.Helper()
		if cmd != nil {
			ui.Update(cmd())
		}
	}
	keys := func(s string) {
		for _, r := range s {
			_, cmd := ui.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
			do(cmd)
		}
	}
	ui.Update(tea.KeyPressMsg{Code: 'r', Text: "r"}) // its batch reads the runs and arms a tick
	do(ui.loadRuns())
	screen := ui.render()
	if !strings.Contains(screen, "CHECKPOINTS WAITING FOR YOU") || !strings.Contains(screen, "/checkpoint:approve#0") ||
		!strings.Contains(screen, "running") || !strings.Contains(screen, run) {
		t.Fatalf("r: the waiting run is not on screen:\n%s", screen)
	}
	if strings.Contains(screen, "\x1b[2J") {
		t.Fatal("a program's escape sequence reached the screen raw")
	}

	keys("ayes")
	_, cmd := ui.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	do(cmd)
	if screen = ui.render(); !strings.Contains(screen, "not answered: the answer is JSON") {
		t.Fatalf("a bare word was not refused:\n%s", screen)
	}
	if as, err := sp.Answers(t.Context(), run, "/checkpoint:approve#0"); err != nil || len(as) != 0 {
		t.Fatalf("answers after a refused one: %v %v", as, err)
	}
	keys(`a"yes"`)
	_, cmd = ui.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	do(cmd)
	if screen = ui.render(); !strings.Contains(screen, "answered /checkpoint:approve#0") {
		t.Fatalf("no answer on screen:\n%s", screen)
	}
	select {
	case o := <-done:
		if o.State != runstore.StateCompleted {
			t.Fatalf("run ended %+v", o)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not complete after the console answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || logs[0] != "answer yes by carol" {
		t.Fatalf("logs %q", logs)
	}
}
