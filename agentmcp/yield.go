package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/mgrclient"
)

// YieldToolNames are the tools listed after the others to an agent that may be handed
// workflow-run turns (Server.Turns set).
var YieldToolNames = []string{"cotal_yield"}

// Bounds of cotal_yield's arguments.
const (
	maxGoalID     = 200
	maxYieldTo    = 64
	maxYieldValue = 64 << 10 // bytes of the JSON value of an ask's answer
	maxTurnsShown = 20
	shownPayload  = 8 << 10
)

type (
	// yieldArgs are the reference's cotal_yield arguments (status, to, note, turn) and
	// Go's value, the record an ask waits for.
	yieldArgs struct {
		Status string         `json:"status" jsonschema:"done when the work is done, blocked (with a note) when you cannot go on, handoff (with to) to pass it on"`
		Turn   string         `json:"turn,omitempty" jsonschema:"the turn to end, as its message names it (goal ...); may be omitted when exactly one turn waits for you"`
		To     string         `json:"to,omitempty" jsonschema:"with handoff: the teammate you hand the work to"`
		Note   string         `json:"note,omitempty" jsonschema:"one short note for the run (why blocked, what was done)"`
		Value  map[string]any `json:"value,omitempty" jsonschema:"for a turn that asks for a record: the record, with exactly the fields and types it asks for"`
	}
	yieldOut struct {
		Turn  string `json:"turn"`
		State string `json:"state"`
	}
)

func yieldSchema() *jsonschema.Schema {
	return toolSchema[yieldArgs](func(p map[string]*jsonschema.Schema) {
		p["turn"].MaxLength = maxLen(maxGoalID)
		p["status"].Enum = []any{"done", "blocked", "handoff"}
		p["to"].MaxLength = maxLen(maxYieldTo)
		p["note"].MaxLength = maxLen(mgrclient.MaxYieldNote)
		n := 64
		p["value"].MaxProperties = &n
	})
}

// addYieldTool registers cotal_yield when the server can reach the manager's turn relay.
func (s *Server) addYieldTool() {
	if s.Turns == nil {
		return
	}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_yield", Title: "Cotal: end a workflow-run turn", InputSchema: yieldSchema(),
		Description: "End a turn a workflow run handed you (a direct message from the manager names it and says what to do). " +
			"status done when the work is done, blocked (with a note) when you cannot go on, handoff (with to) to pass it on; " +
			"turn names it, and may be left out when exactly one waits (otherwise the waiting turns are listed). " +
			"A turn that asks for a record ends only with status done and value set to that record, with exactly the fields and types it asks for."},
		s.yield)
}

func (s *Server) yield(ctx context.Context, _ *mcp.CallToolRequest, a yieldArgs) (*mcp.CallToolResult, yieldOut, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if a.Turn == "" {
		p, err := s.Turns.TurnPending(cctx)
		if err != nil {
			return nil, yieldOut{}, yieldErr("list your turns", err)
		}
		if len(p.Turns) != 1 {
			return nil, yieldOut{}, fmt.Errorf("cotal_yield: %s", pendingList(p.Turns))
		}
		a.Turn = p.Turns[0].GoalID
	}
	var raw json.RawMessage
	if a.Value != nil {
		b, err := json.Marshal(a.Value)
		if err != nil || len(b) > maxYieldValue {
			return nil, yieldOut{}, fmt.Errorf("cotal_yield: value: at most %d bytes of JSON", maxYieldValue)
		}
		raw = b
	}
	res, err := s.Turns.TurnYield(cctx, mgrclient.TurnYieldArgs{GoalID: a.Turn, Status: a.Status, To: a.To, Note: a.Note, Value: raw})
	if err != nil {
		return nil, yieldOut{}, yieldErr("yield turn "+peerText(a.Turn, maxGoalID), err)
	}
	out := yieldOut{Turn: peerText(res.GoalID, maxGoalID), State: res.State}
	return text("Turn %s yielded %s: %s.", out.Turn, a.Status, out.State), out, nil
}

// pendingList words the turns that wait, for a yield that named none and could not pick
// one: every string the run chose is escaped.
func pendingList(turns []mgrclient.PendingTurn) string {
	if len(turns) == 0 {
		return "no workflow-run turn waits for you: nothing to yield"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d turns wait for you; name the one to end with turn:", len(turns))
	for i, t := range turns {
		if i == maxTurnsShown {
			fmt.Fprintf(&b, "\n… [%d more]", len(turns)-i)
			break
		}
		fmt.Fprintf(&b, "\n- turn %s, deadline %s: %s", peerText(t.GoalID, maxGoalID),
			time.UnixMilli(t.DeadlineAt).UTC().Format(time.RFC3339), peerText(t.Payload, shownPayload))
		if t.Ask != nil {
			sch, _ := json.Marshal(t.Ask)
			fmt.Fprintf(&b, " (answer with status done and value %s)", peerText(string(sch), shownPayload))
		}
	}
	return b.String()
}

// yieldErr words a relay refusal for the model: the manager's sentence, escaped.
func yieldErr(what string, err error) error {
	var me *mgrclient.Error
	if errors.As(err, &me) {
		return fmt.Errorf("cotal_yield: %s: %s", what, peerText(me.Message, 2048))
	}
	if errors.Is(err, mgrclient.ErrNoManager) {
		return fmt.Errorf("cotal_yield: %s: no agent manager serves this space", what)
	}
	return fmt.Errorf("cotal_yield: %s: %w", what, err)
}
