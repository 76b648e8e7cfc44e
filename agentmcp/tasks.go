package agentmcp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// TaskToolNames are the task board tools, listed after ToolNames.
var TaskToolNames = []string{"cotal_task_create", "cotal_task_claim", "cotal_task_update", "cotal_task_list"}

// MaxTaskList bounds how many tasks one cotal_task_list returns.
const MaxTaskList = 100

// TaskOptions tunes the task board tools; the zero value is the real clock and
// taskboard.Lease.
type TaskOptions struct {
	Now   func() time.Time // the board's clock
	Tick  <-chan time.Time // renews held claims on each tick; nil renews every quarter lease
	Lease time.Duration    // 0 is taskboard.Lease
	OnErr func(error)      // a failed renewal; nil logs nothing
}

// taskTools is the board handle of one Run: opened at the first task tool call, and
// from then renewing this agent's claims until Run ends.
type taskTools struct {
	run  context.Context
	opts TaskOptions
	mu   sync.Mutex
	b    *taskboard.Board
}

func (s *Server) board(ctx context.Context) (*taskboard.Board, error) {
	tt := s.tasks
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.b != nil {
		return tt.b, nil
	}
	ep := s.Endpoint
	b, err := taskboard.Connect(ctx, ep.Conn(), ep.Space(), ep.Principal(), taskboard.Options{Now: tt.opts.Now, Lease: tt.opts.Lease})
	if err != nil {
		return nil, err
	}
	tt.b = b
	go b.RenewEvery(tt.run, tt.opts.Tick, tt.opts.OnErr)
	return b, nil
}

type (
	taskCreateArgs struct {
		Title    string `json:"title" jsonschema:"one line saying what is to be done"`
		Body     string `json:"body,omitempty" jsonschema:"details: what done means, where to look"`
		Role     string `json:"role,omitempty" jsonschema:"the role it is for; one holder of the role is sent a notice (an anycast ask carrying the task id)"`
		Assignee string `json:"assignee,omitempty" jsonschema:"the one peer (name or owner.actor id) who may claim it; it is sent a direct message"`
	}
	taskIDArgs struct {
		ID string `json:"id" jsonschema:"the task id"`
	}
	taskUpdateArgs struct {
		ID     string `json:"id" jsonschema:"the task id"`
		Status string `json:"status" jsonschema:"the new status; open gives a task you hold back"`
		Note   string `json:"note,omitempty" jsonschema:"a short note: progress, what blocks you, the result"`
	}
	taskListArgs struct {
		Status string `json:"status,omitempty" jsonschema:"only tasks in this status; any lists finished ones too; default every unfinished task"`
		Role   string `json:"role,omitempty" jsonschema:"only tasks for this role"`
		Mine   bool   `json:"mine,omitempty" jsonschema:"only tasks you hold or that are assigned to you"`
		ID     string `json:"id,omitempty" jsonschema:"show this one task whole, body included"`
	}
	// TaskInfo is one task as a tool shows it; every string a peer chose is escaped.
	TaskInfo struct {
		ID         string `json:"id"`
		Title      string `json:"title"`
		Body       string `json:"body,omitempty"`
		Role       string `json:"role,omitempty"`
		Assignee   string `json:"assignee,omitempty"`
		Creator    string `json:"creator"`
		Status     string `json:"status"`
		Holder     string `json:"holder,omitempty"`
		Note       string `json:"note,omitempty"`
		Updated    string `json:"updated"`
		LeaseUntil string `json:"leaseUntil,omitempty"`
		Yours      bool   `json:"yours,omitempty"`
	}
	taskOut struct {
		Task     TaskInfo `json:"task"`
		Notified string   `json:"notified,omitempty"`
	}
	taskListOut struct {
		Tasks []TaskInfo `json:"tasks"`
		More  int        `json:"more"`
	}
)

func (s *Server) addTaskTools(ctx context.Context, opts TaskOptions) {
	if opts.OnErr == nil {
		opts.OnErr = func(err error) { s.Logger.Warn("renew task claims", "err", err) }
	}
	s.tasks = &taskTools{run: ctx, opts: opts}
	// Open the board now, so claims this principal still holds (a restarted agent) are
	// renewed before any task tool is called. A space without the board (provisioned
	// before it existed) is opened again at the first task tool call.
	go func() {
		if _, err := s.board(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Debug("task board", "err", err)
		}
	}()
	idArg := func(p map[string]*jsonschema.Schema) {
		p["id"].MaxLength, p["id"].Pattern = maxLen(32), "^[a-z0-9]{1,32}$"
	}
	create := toolSchema[taskCreateArgs](func(p map[string]*jsonschema.Schema) {
		p["title"].MaxLength, p["body"].MaxLength = maxLen(taskboard.MaxTitle), maxLen(taskboard.MaxBody)
		p["role"].MaxLength, p["assignee"].MaxLength = maxLen(protocol.MaxRoleLength), maxLen(protocol.MaxNameLength)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_task_create", Title: "Cotal: add a task to the board", InputSchema: create,
		Description: "Add an open task to the space's shared task board. With role, one holder of that role is sent an anycast notice naming the task; with assignee, only that peer may claim it and it is sent a DM. Returns the task id."},
		s.taskCreate)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_task_claim", Title: "Cotal: claim a task", InputSchema: toolSchema[taskIDArgs](idArg),
		Description: "Take an open task: exactly one claimer wins; a loser is told who holds it. Your claim lasts while this session runs (it renews a lease); if you go away it lapses and the task is open again."},
		s.taskClaim)
	upd := toolSchema[taskUpdateArgs](func(p map[string]*jsonschema.Schema) {
		idArg(p)
		p["status"].Enum = []any{taskboard.Open, taskboard.Claimed, taskboard.Working, taskboard.Blocked, taskboard.Done, taskboard.Failed, taskboard.Cancelled}
		p["note"].MaxLength = maxLen(taskboard.MaxNote)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_task_update", Title: "Cotal: update a task", InputSchema: upd,
		Description: "Set a task's status with a note. Only its holder may (working, blocked, done, failed, cancelled; open gives it back); anyone may cancel an open task and its creator any unfinished one. done, failed and cancelled are final."},
		s.taskUpdate)
	list := toolSchema[taskListArgs](func(p map[string]*jsonschema.Schema) {
		p["status"].Enum = append([]any{"any"}, taskboard.Open, taskboard.Claimed, taskboard.Working, taskboard.Blocked, taskboard.Done, taskboard.Failed, taskboard.Cancelled)
		p["role"].MaxLength = maxLen(protocol.MaxRoleLength)
		p["id"].MaxLength, p["id"].Pattern = maxLen(32), "^[a-z0-9]{1,32}$"
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_task_list", Title: "Cotal: the task board", InputSchema: list, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: fmt.Sprintf("The space's task board, newest first, at most %d: each task's id, status, holder and title (default every unfinished task). Pass id to see one task whole.", MaxTaskList)},
		s.taskList)
}

func (s *Server) taskInfo(t taskboard.Task) TaskInfo {
	me := s.Endpoint.Principal().String()
	ti := TaskInfo{ID: t.ID, Title: peerText(t.Title, taskboard.MaxTitle), Body: peerText(t.Body, taskboard.MaxBody),
		Role: t.Role, Assignee: t.Assignee, Creator: t.Creator, Status: t.Status, Holder: t.Holder,
		Note: peerText(t.Note, taskboard.MaxNote), Updated: t.Updated.UTC().Format(time.RFC3339), Yours: t.Holder == me}
	if !t.LeaseUntil.IsZero() {
		ti.LeaseUntil = t.LeaseUntil.UTC().Format(time.RFC3339)
	}
	return ti
}

// taskLine is one task on one line; every field is validated or escaped.
func taskLine(t TaskInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s", t.ID, t.Status, t.Title)
	if t.Role != "" {
		b.WriteString(" (role " + t.Role + ")")
	}
	if t.Holder != "" {
		b.WriteString(" held by " + t.Holder)
		if t.Yours {
			b.WriteString(" [you]")
		}
	}
	if t.Assignee != "" && t.Holder == "" {
		b.WriteString(" for " + t.Assignee)
	}
	if t.Note != "" {
		b.WriteString(" - " + t.Note)
	}
	return b.String()
}

func taskWhole(t TaskInfo) string {
	s := taskLine(t) + "\ncreated by " + t.Creator + ", updated " + t.Updated
	if t.LeaseUntil != "" {
		s += ", claim lapses " + t.LeaseUntil + " unless renewed"
	}
	if t.Body != "" {
		s += "\n" + t.Body
	}
	return s
}

func (s *Server) taskCreate(ctx context.Context, _ *mcp.CallToolRequest, a taskCreateArgs) (*mcp.CallToolResult, taskOut, error) {
	b, err := s.board(ctx)
	if err != nil {
		return nil, taskOut{}, err
	}
	row := taskboard.TaskRow{Title: a.Title, Body: a.Body, Role: a.Role}
	var to *client.Target
	if a.Assignee != "" {
		p, err := s.Endpoint.Resolve(ctx, a.Assignee)
		if err != nil {
			return nil, taskOut{}, fmt.Errorf("assignee %q: %w", a.Assignee, err)
		}
		row.Assignee, to = p.Principal.String(), &p
	}
	t, err := b.Create(ctx, row)
	if err != nil {
		return nil, taskOut{}, err
	}
	out := taskOut{Task: s.taskInfo(t)}
	notice := fmt.Sprintf("Task %s: %s. Claim it with cotal_task_claim {\"id\": %q}.", t.ID, t.Title, t.ID)
	switch {
	case to != nil:
		if _, err := s.Endpoint.DM(ctx, to.Principal, client.Text(notice)); err != nil {
			return nil, out, fmt.Errorf("task %s created; telling %s: %w", t.ID, to.Name, err)
		}
		out.Notified = to.Principal.String()
	case t.Role != "":
		if _, err := s.Endpoint.Ask(ctx, t.Role, client.Text(notice)); err != nil {
			return nil, out, fmt.Errorf("task %s created; telling role %s: %w", t.ID, t.Role, err)
		}
		out.Notified = "role " + t.Role
	}
	msg := "Created task " + taskLine(out.Task) + "."
	if out.Notified != "" {
		msg += " Sent a notice to " + out.Notified + "."
	}
	return text("%s", msg), out, nil
}

func (s *Server) taskClaim(ctx context.Context, _ *mcp.CallToolRequest, a taskIDArgs) (*mcp.CallToolResult, taskOut, error) {
	b, err := s.board(ctx)
	if err != nil {
		return nil, taskOut{}, err
	}
	t, err := b.Claim(ctx, a.ID)
	if err != nil {
		return nil, taskOut{}, err
	}
	out := taskOut{Task: s.taskInfo(t)}
	return text("You hold task %s\nSet its status with cotal_task_update as you go (working, blocked, done).", taskWhole(out.Task)), out, nil
}

func (s *Server) taskUpdate(ctx context.Context, _ *mcp.CallToolRequest, a taskUpdateArgs) (*mcp.CallToolResult, taskOut, error) {
	b, err := s.board(ctx)
	if err != nil {
		return nil, taskOut{}, err
	}
	t, err := b.Update(ctx, a.ID, a.Status, a.Note)
	if err != nil {
		return nil, taskOut{}, err
	}
	out := taskOut{Task: s.taskInfo(t)}
	return text("Task %s", taskLine(out.Task)), out, nil
}

func (s *Server) taskList(ctx context.Context, _ *mcp.CallToolRequest, a taskListArgs) (*mcp.CallToolResult, taskListOut, error) {
	if a.Status != "" && a.Status != "any" && !taskboard.ValidStatus(a.Status) {
		return nil, taskListOut{}, fmt.Errorf("status %q: want any or one of %s", a.Status, strings.Join(taskboard.Statuses, ", "))
	}
	b, err := s.board(ctx)
	if err != nil {
		return nil, taskListOut{}, err
	}
	if a.ID != "" {
		t, err := b.Get(ctx, a.ID)
		if err != nil {
			return nil, taskListOut{}, err
		}
		ti := s.taskInfo(t)
		return text("%s", taskWhole(ti)), taskListOut{Tasks: []TaskInfo{ti}}, nil
	}
	all, err := b.List(ctx)
	if err != nil {
		return nil, taskListOut{}, err
	}
	out := taskListOut{Tasks: []TaskInfo{}}
	me := s.Endpoint.Principal().String()
	for i := len(all) - 1; i >= 0; i-- {
		t := all[i]
		switch {
		case a.Status == "" && taskboard.Terminal(t.Status),
			a.Status != "" && a.Status != "any" && t.Status != a.Status,
			a.Role != "" && t.Role != a.Role,
			a.Mine && t.Holder != me && t.Assignee != me:
			continue
		}
		if len(out.Tasks) == MaxTaskList {
			out.More++
			continue
		}
		ti := s.taskInfo(t)
		ti.Body = "" // the list is one line a task; id shows one whole
		out.Tasks = append(out.Tasks, ti)
	}
	if len(out.Tasks) == 0 {
		return text("No tasks match."), out, nil
	}
	var sb strings.Builder
	for _, t := range out.Tasks {
		sb.WriteString(taskLine(t) + "\n")
	}
	if out.More > 0 {
		fmt.Fprintf(&sb, "%d more not shown; narrow with status, role or mine.\n", out.More)
	}
	return text("%s", strings.TrimSuffix(sb.String(), "\n")), out, nil
}
