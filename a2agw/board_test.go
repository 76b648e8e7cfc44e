package a2agw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// withBoard gives a gateway the space's task board as its own identity (its real
// minted agent credential), as cotal a2a does.
func withBoard(t *testing.T) func(*a2agw.Config) { return withBoardLease(t, 0) }

// withBoardLease is withBoard with the board's lease (0 is taskboard.Lease).
func withBoardLease(t *testing.T, lease time.Duration) func(*a2agw.Config) {
	return func(c *a2agw.Config) {
		b, err := taskboard.Connect(t.Context(), c.Endpoint.Conn(), space, c.Endpoint.Principal(), taskboard.Options{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		c.Board = b
	}
}

// boardTask waits for the one board task of role and returns it once want says so.
func boardTask(t *testing.T, b *taskboard.Board, role, what string, want func(taskboard.Task) bool) taskboard.Task {
	t.Helper()
	var got taskboard.Task
	meshtest.Until(t, what, 20*time.Second, func() bool {
		all, err := b.List(t.Context())
		if err != nil {
			return false
		}
		for _, tk := range all {
			if tk.Role == role {
				got = tk
				return want(tk)
			}
		}
		return false
	})
	return got
}

// TestRoleTaskOnBoard: a caller's task for a role is a board task (its title the
// message's first line, bounded) held while the role works, done when the role's reply
// completes it; a canceled one is cancelled, a failed one failed. A task for an agent
// adds nothing to the board.
func TestRoleTaskOnBoard(t *testing.T) {
	m := mesh(t)
	rev := peer(t, m, "rev1", "review")
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), withBoard(t), "review", "agent:bob")
	watcher, err := taskboard.Connect(t.Context(), rev.Conn(), space, rev.Principal(), taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}

	long := "review y.go " + strings.Repeat("é", 300) + "\nsecond line"
	tk := task(t, call(t, g.srv.URL, "review", "message/send", map[string]any{"message": userMsg(long),
		"configuration": map[string]any{"blocking": false}}))
	open := boardTask(t, watcher, "review", "the role task on the board, working", func(b taskboard.Task) bool { return b.Status == taskboard.Working })
	if !strings.HasPrefix(open.Title, "A2A: review y.go é") || len(open.Title) > taskboard.MaxTitle || strings.Contains(open.Title, "second line") {
		t.Fatalf("board title %q (%d bytes)", open.Title, len(open.Title))
	}
	if open.Holder != "local.a2a" || !strings.Contains(open.Body, tk.ID) {
		t.Fatalf("board task %+v", open)
	}
	answer(t, rev, "looks fine")
	done := boardTask(t, watcher, "review", "the board task done", func(b taskboard.Task) bool { return b.Status == taskboard.Done })
	if !strings.Contains(done.Note, "answered by local.rev1") {
		t.Fatalf("done note %q", done.Note)
	}

	// A canceled role task is cancelled on the board.
	tk2 := task(t, call(t, g.srv.URL, "review", "message/send", map[string]any{"message": userMsg("second job"),
		"configuration": map[string]any{"blocking": false}}))
	second := func(b taskboard.Task) bool { return b.Title == "A2A: second job" }
	meshtest.Until(t, "the second board task", 20*time.Second, func() bool {
		all, _ := watcher.List(t.Context())
		for _, b := range all {
			if second(b) && b.Status == taskboard.Working {
				return true
			}
		}
		return false
	})
	task(t, call(t, g.srv.URL, "review", "tasks/cancel", map[string]any{"id": tk2.ID}))
	meshtest.Until(t, "the second board task cancelled", 20*time.Second, func() bool {
		all, _ := watcher.List(t.Context())
		for _, b := range all {
			if second(b) && b.Status == taskboard.Cancelled {
				return true
			}
		}
		return false
	})
	_ = clienttest.Receive(t, rev, 20*time.Second).Ack()

	// A role task the holder fails is failed on the board.
	task(t, call(t, g.srv.URL, "review", "message/send", map[string]any{"message": userMsg("third job"),
		"configuration": map[string]any{"blocking": false}}))
	answer(t, rev, "[failed] cannot read it")
	meshtest.Until(t, "the third board task failed", 20*time.Second, func() bool {
		all, _ := watcher.List(t.Context())
		for _, b := range all {
			if b.Title == "A2A: third job" && b.Status == taskboard.Failed {
				return true
			}
		}
		return false
	})

	// A task for an agent is a DM, not a board task.
	task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("for bob"),
		"configuration": map[string]any{"blocking": false}}))
	_ = clienttest.Receive(t, bob, 20*time.Second).Ack()
	all, err := watcher.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("board has %d tasks, want the 3 role tasks: %+v", len(all), all)
	}
}

// TestRoleTaskBoardAcrossRestart: the gateway stops mid-task for longer than the board's
// lease, so its claim lapses and the board task is open again; the role's reply arrives
// meanwhile, and the next gateway completes the A2A task and takes the board task back to
// end it done.
func TestRoleTaskBoardAcrossRestart(t *testing.T) {
	m := mesh(t)
	rev := peer(t, m, "rev1", "review")
	const lease = 2 * time.Second
	watcher, err := taskboard.Connect(t.Context(), rev.Conn(), space, rev.Principal(), taskboard.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	uid := protocol.NewLifecycleUID()
	g1 := startGateway(t, m, uid, withBoardLease(t, lease), "review")
	tk := task(t, call(t, g1.srv.URL, "review", "message/send", map[string]any{"message": userMsg("slow review"),
		"configuration": map[string]any{"blocking": false}}))
	start := time.Now()
	boardTask(t, watcher, "review", "the board task working", func(b taskboard.Task) bool { return b.Status == taskboard.Working })
	// While the gateway runs it renews its claim: the task outlives the lease, held.
	boardTask(t, watcher, "review", "the board task held past its lease", func(b taskboard.Task) bool {
		return b.Status == taskboard.Working && b.Holder == "local.a2a" && time.Since(start) > 2*lease
	})
	ask := clienttest.Receive(t, rev, 20*time.Second)
	g1.stop()
	boardTask(t, watcher, "review", "the gateway's claim lapsed", func(b taskboard.Task) bool { return b.Status == taskboard.Open })
	if _, err := rev.DM(t.Context(), protocol.Principal{Owner: "local", Actor: "a2a"}, client.Draft{Parts: []protocol.Part{protocol.TextPart("finished")}, ReplyTo: ask.ID}); err != nil {
		t.Fatal(err)
	}
	_ = ask.Ack()
	g2 := startGateway(t, m, uid, withBoardLease(t, lease), "review")
	meshtest.Until(t, "the A2A task completed after the restart", 20*time.Second, func() bool {
		return task(t, call(t, g2.srv.URL, "review", "tasks/get", map[string]any{"id": tk.ID})).Status.State == a2agw.StateCompleted
	})
	done := boardTask(t, watcher, "review", "the board task done", func(b taskboard.Task) bool { return b.Status == taskboard.Done })
	if done.Holder != "local.a2a" {
		t.Fatalf("board task %+v", done)
	}
}
