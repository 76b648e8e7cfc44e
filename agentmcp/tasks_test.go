package agentmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/taskboard"
)

// taskClock is a settable clock shared by the servers of one test.
type taskClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *taskClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *taskClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// taskServer runs name's MCP server with task options and returns the model's session
// and a stop func that ends the server (the agent going away without a word).
func taskServer(t *testing.T, tm *textMesh, name string, opts agentmcp.TaskOptions) (*mcp.ClientSession, func()) {
	t.Helper()
	creds, uid := tm.agentCreds(t, name, "worker")
	ep, err := client.New(tm.m.Connect(creds), client.Config{Space: space, Name: name, Role: "worker", LifecycleUID: uid})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Ready: func() { close(ready) }, Tasks: opts}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; _ = ep.Close() }) }
	t.Cleanup(stop)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("%s's server ended: %v", name, err)
	case <-time.After(textHang):
		t.Fatalf("%s never joined", name)
	}
	return cs, stop
}

// taskCall calls a task tool and decodes its structured task.
func taskCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (agentmcp.TaskInfo, string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	txt := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			txt += tc.Text
		}
	}
	var out struct {
		Task  agentmcp.TaskInfo
		Tasks []agentmcp.TaskInfo
	}
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &out) // an error result has none
	if len(out.Tasks) == 1 {
		out.Task = out.Tasks[0]
	}
	return out.Task, txt, res.IsError
}

// TestTaskClaimRaceThroughMCP: through real MCP client sessions, alice and bob race to
// claim each of 100 tasks alice creates: exactly one wins each race, the winner marks it
// done, and the other then sees done.
func TestTaskClaimRaceThroughMCP(t *testing.T) {
	tm := newTextMesh(t)
	alice, _ := taskServer(t, tm, "alice", agentmcp.TaskOptions{})
	bob, _ := taskServer(t, tm, "bob", agentmcp.TaskOptions{})
	sessions := []*mcp.ClientSession{alice, bob}
	wins := [2]int{}
	for i := range 100 {
		task, txt, isErr := taskCall(t, alice, "cotal_task_create", map[string]any{"title": "race " + string(rune('a'+i%26))})
		if isErr || task.ID == "" || task.Status != taskboard.Open {
			t.Fatalf("create: %s %+v", txt, task)
		}
		var wg sync.WaitGroup
		won := make([]bool, 2)
		texts := make([]string, 2)
		for j, cs := range sessions {
			wg.Go(func() {
				_, texts[j], won[j] = taskCall(t, cs, "cotal_task_claim", map[string]any{"id": task.ID})
				won[j] = !won[j]
			})
		}
		wg.Wait()
		if won[0] == won[1] {
			t.Fatalf("race %d: alice won %v, bob won %v: %q", i, won[0], won[1], texts)
		}
		w, l := 0, 1
		if won[1] {
			w, l = 1, 0
		}
		wins[w]++
		if !strings.Contains(texts[l], "holds it") {
			t.Fatalf("race %d: the loser was told %q", i, texts[l])
		}
		if got, txt, isErr := taskCall(t, sessions[w], "cotal_task_update", map[string]any{"id": task.ID, "status": "done", "note": "finished"}); isErr || got.Status != taskboard.Done {
			t.Fatalf("race %d: done: %s", i, txt)
		}
		if got, txt, _ := taskCall(t, sessions[l], "cotal_task_list", map[string]any{"id": task.ID}); got.Status != taskboard.Done || got.Yours {
			t.Fatalf("race %d: the loser sees %s", i, txt)
		}
	}
	t.Logf("alice won %d, bob %d", wins[0], wins[1])
}

// TestTaskClaimLapsesWhenItsServerStops: alice's cotal mcp renews her claim while it runs;
// stopped without a word, her claim lapses a lease after her last renewal and bob takes it.
// The clock is injected; renewals run on a tick the test sends.
func TestTaskClaimLapsesWhenItsServerStops(t *testing.T) {
	tm := newTextMesh(t)
	clk := &taskClock{t: testclock.Epoch(t)}
	tick := make(chan time.Time)
	alice, stopAlice := taskServer(t, tm, "alice", agentmcp.TaskOptions{Now: clk.Now, Tick: tick})
	bob, _ := taskServer(t, tm, "bob", agentmcp.TaskOptions{Now: clk.Now})
	task, _, _ := taskCall(t, bob, "cotal_task_create", map[string]any{"title": "fix \x1b[2Jthe build", "body": "line one\nline two"})
	if _, txt, isErr := taskCall(t, alice, "cotal_task_claim", map[string]any{"id": task.ID}); isErr || !strings.Contains(txt, `fix \x1b[2Jthe build`) {
		t.Fatalf("claim: %q", txt)
	}
	first, _, _ := taskCall(t, bob, "cotal_task_list", map[string]any{"id": task.ID})
	for range 3 { // alive: each renewal moves the lease on
		clk.Add(taskboard.Lease / 2)
		tick <- clk.Now()
		meshtest.Until(t, "alice's renewal", textHang, func() bool {
			got, _, _ := taskCall(t, bob, "cotal_task_list", map[string]any{"id": task.ID})
			return got.LeaseUntil != first.LeaseUntil && got.LeaseUntil == clk.Now().Add(taskboard.Lease).UTC().Format(time.RFC3339)
		})
	}
	if _, txt, isErr := taskCall(t, bob, "cotal_task_claim", map[string]any{"id": task.ID}); !isErr || !strings.Contains(txt, "local.alice holds it") {
		t.Fatalf("bob's claim of alice's live task: %q", txt)
	}
	stopAlice()
	clk.Add(taskboard.Lease + time.Second)
	got, txt, isErr := taskCall(t, bob, "cotal_task_claim", map[string]any{"id": task.ID})
	if isErr || got.Holder != "local.bob" || !got.Yours {
		t.Fatalf("bob's claim after alice's lease: %q", txt)
	}
	if _, txt, isErr := taskCall(t, bob, "cotal_task_create", map[string]any{"title": "two\nlines"}); !isErr || !strings.Contains(txt, "one line") {
		t.Fatalf("a two-line title: %q", txt)
	}
}

// TestTaskForRoleSendsAnAsk: a task for a role reaches one of its holders as an anycast
// ask naming the task id, and it may then claim it.
func TestTaskForRoleSendsAnAsk(t *testing.T) {
	tm := newTextMesh(t)
	lead, _ := taskServer(t, tm, "lead", agentmcp.TaskOptions{})
	w, _ := tm.agentServer(t, "w1", "reviewer")
	task, txt, isErr := taskCall(t, lead, "cotal_task_create", map[string]any{"title": "review the patch", "role": "reviewer"})
	if isErr || !strings.Contains(txt, "role reviewer") {
		t.Fatalf("create: %q", txt)
	}
	meshtest.Until(t, "the ask reaches the reviewer", textHang, func() bool {
		texts, _, _ := inboxWindow(t, w, nil)
		return len(texts) == 1 && strings.Contains(texts[0], task.ID)
	})
	if got, txt, isErr := taskCall(t, w, "cotal_task_claim", map[string]any{"id": task.ID}); isErr || got.Holder != "local.w1" {
		t.Fatalf("the reviewer's claim: %q", txt)
	}
	if list, txt, _ := taskCall(t, lead, "cotal_task_list", map[string]any{"role": "reviewer"}); list.Status != taskboard.Claimed {
		t.Fatalf("list by role: %q", txt)
	}
}

// TestRestartedAgentRenewsItsClaim: alice's session ends and a new one starts for her;
// it renews the claim she still holds at once, before any task tool is called.
func TestRestartedAgentRenewsItsClaim(t *testing.T) {
	tm := newTextMesh(t)
	clk := &taskClock{t: testclock.Epoch(t)}
	alice, stop := taskServer(t, tm, "alice", agentmcp.TaskOptions{Now: clk.Now})
	bob, _ := taskServer(t, tm, "bob", agentmcp.TaskOptions{Now: clk.Now})
	task, _, _ := taskCall(t, bob, "cotal_task_create", map[string]any{"title": "survive a restart"})
	if _, txt, isErr := taskCall(t, alice, "cotal_task_claim", map[string]any{"id": task.ID}); isErr {
		t.Fatal(txt)
	}
	stop()
	tick := make(chan time.Time)
	taskServer(t, tm, "alice", agentmcp.TaskOptions{Now: clk.Now, Tick: tick})
	clk.Add(taskboard.Lease / 2)
	select {
	case tick <- clk.Now():
	case <-time.After(textHang):
		t.Fatal("the new session never renews: nothing takes its tick")
	}
	meshtest.Until(t, "the new session's renewal", textHang, func() bool {
		got, _, _ := taskCall(t, bob, "cotal_task_list", map[string]any{"id": task.ID})
		return got.Holder == "local.alice" && got.LeaseUntil == clk.Now().Add(taskboard.Lease).UTC().Format(time.RFC3339)
	})
}

// TestRosterShowsHeldTasks: a task a peer claimed is listed with it in the roster, in the
// structured entry and in the line the model reads; a finished one is not.
func TestRosterShowsHeldTasks(t *testing.T) {
	tm := newTextMesh(t)
	lead, _ := taskServer(t, tm, "lead", agentmcp.TaskOptions{})
	w, _ := taskServer(t, tm, "w1", agentmcp.TaskOptions{})
	task, txt, isErr := taskCall(t, lead, "cotal_task_create", map[string]any{"title": "fix the build"})
	if isErr {
		t.Fatalf("create: %q", txt)
	}
	if _, txt, isErr := taskCall(t, w, "cotal_task_claim", map[string]any{"id": task.ID}); isErr {
		t.Fatalf("claim: %q", txt)
	}
	type rosterOut struct{ Peers []agentmcp.PeerInfo }
	tasksOf := func(name string) ([]string, string) {
		r, line := structured[rosterOut](t, lead, "cotal_roster", nil)
		for _, p := range r.Peers {
			if p.Name == name {
				return p.Tasks, line
			}
		}
		return nil, line
	}
	meshtest.Until(t, "w1 in the roster", textHang, func() bool { ids, _ := tasksOf("w1"); return len(ids) > 0 })
	ids, line := tasksOf("w1")
	if len(ids) != 1 || ids[0] != task.ID || !strings.Contains(line, "tasks "+task.ID) {
		t.Fatalf("w1's tasks %v in the roster line %q, want %s", ids, line, task.ID)
	}
	if _, txt, isErr := taskCall(t, w, "cotal_task_update", map[string]any{"id": task.ID, "status": "done"}); isErr {
		t.Fatalf("done: %q", txt)
	}
	if ids, _ := tasksOf("w1"); len(ids) != 0 {
		t.Fatalf("w1 still listed with %v after done", ids)
	}
}
