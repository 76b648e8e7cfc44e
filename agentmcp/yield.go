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
	yieldArgs struct {
		GoalID string         `json:"goalId,omitempty" jsonschema:"the turn to end (from the turn's message or from this tool called with no status); may be omitted when exactly one turn waits"`
		Status string         `json:"status,omitempty" jsonschema:"done, blocked or handoff; omit to list the turns that wait for you"`
		To     string         `json:"to,omitempty" jsonschema:"with handoff: the teammate you hand the work to"`
		Note   string         `json:"note,omitempty" jsonschema:"one short note for the run (why blocked, what was done)"`
		Value  map[string]any `json:"value,omitempty" jsonschema:"for a turn that asks for a record: the record, with exactly the fields and types it asks for"`
	}
	// PendingTurnInfo is one turn that waits for the agent, as the model sees it.
	PendingTurnInfo struct {
		GoalID   string         `json:"goalId"`
		Task     string         `json:"task"`
		Deadline string         `json:"deadline"`
		Asks     map[string]any `json:"asks,omitempty"`
	}
	yieldOut struct {
		Turns  []PendingTurnInfo `json:"turns,omitempty"`
		GoalID string            `json:"goalId,omitempty"`
		State  string            `json:"state,omitempty"`
	}
)

func yieldSchema() *jsonschema.Schema {
	return toolSchema[yieldArgs](func(p map[string]*jsonschema.Schema) {
		p["goalId"].MaxLength = maxLen(maxGoalID)
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
		Description: "A workflow run hands you turns (a direct message from the manager tells you one waits). Call with no status to list them; " +
			"call with goalId and status done when the work is done, blocked (with a note) when you cannot go on, or handoff (with to) to pass it on. " +
			"A turn that asks for a record ends only with status done and value set to that record, with exactly the fields and types it asks for."},
		s.yield)
}

func (s *Server) yield(ctx context.Context, _ *mcp.CallToolRequest, a yieldArgs) (*mcp.CallToolResult, yieldOut, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if a.Status == "" || a.GoalID == "" {
		p, err := s.Turns.TurnPending(cctx)
		if err != nil {
			return nil, yieldOut{}, yieldErr("list your turns", err)
		}
		if a.Status == "" || len(p.Turns) != 1 {
			out := yieldOut{}
			var b strings.Builder
			switch {
			case len(p.Turns) == 0:
				b.WriteString("No workflow-run turn waits for you.")
			case a.Status != "":
				fmt.Fprintf(&b, "%d turns wait for you: name the one to end with goalId.\n", len(p.Turns))
			default:
				fmt.Fprintf(&b, "%d turn(s) wait for you:\n", len(p.Turns))
			}
			for i, t := range p.Turns {
				if i == maxTurnsShown {
					fmt.Fprintf(&b, "… [%d more]\n", len(p.Turns)-i)
					break
				}
				info := PendingTurnInfo{GoalID: peerText(t.GoalID, maxGoalID), Task: peerText(t.Payload, shownPayload),
					Deadline: time.UnixMilli(t.DeadlineAt).UTC().Format(time.RFC3339), Asks: t.Ask}
				out.Turns = append(out.Turns, info)
				fmt.Fprintf(&b, "- goal %s, deadline %s: %s\n", info.GoalID, info.Deadline, info.Task)
				if t.Ask != nil {
					sch, _ := json.Marshal(t.Ask)
					fmt.Fprintf(&b, "  answer with status done and value %s\n", peerText(string(sch), shownPayload))
				}
			}
			return text("%s", strings.TrimSpace(b.String())), out, nil
		}
		a.GoalID = p.Turns[0].GoalID
	}
	var raw json.RawMessage
	if a.Value != nil {
		b, err := json.Marshal(a.Value)
		if err != nil || len(b) > maxYieldValue {
			return nil, yieldOut{}, fmt.Errorf("cotal_yield: value: at most %d bytes of JSON", maxYieldValue)
		}
		raw = b
	}
	res, err := s.Turns.TurnYield(cctx, mgrclient.TurnYieldArgs{GoalID: a.GoalID, Status: a.Status, To: a.To, Note: a.Note, Value: raw})
	if err != nil {
		return nil, yieldOut{}, yieldErr("yield turn "+a.GoalID, err)
	}
	return text("Turn %s yielded %s: %s.", peerText(res.GoalID, maxGoalID), a.Status, res.State), yieldOut{GoalID: res.GoalID, State: res.State}, nil
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
