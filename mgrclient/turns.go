package mgrclient

import (
	"context"
	"encoding/json"
)

// The turn relay of a workflow run, seen from the seat: the manager holds each turn a
// run hands a seat until the seat yields it. A seat lists its own pending turns
// (turn-pending) and ends one (turn-yield) on the agent rail, for itself only. The shapes
// follow the reference's TURN_PENDING_OUTPUT and TURN_YIELD_INPUT schemas; Value is a Go
// extension: the typed answer of an ask, filed as the ask's answer record.

// MaxYieldNote bounds a yield's note, in characters (the reference's 4096).
const MaxYieldNote = 4096

// PendingTurn is one turn a seat was handed and has not yielded. Ask is the answer's
// schema shorthand when the turn is an ask (a Go extension).
type PendingTurn struct {
	GoalID     string         `json:"goalId"`
	Payload    string         `json:"payload"`
	AcceptedAt int64          `json:"acceptedAt"`
	DeadlineAt int64          `json:"deadlineAt"`
	Ask        map[string]any `json:"ask,omitempty"`
}

// TurnPendingResult answers turn-pending.
type TurnPendingResult struct {
	Turns []PendingTurn `json:"turns"`
}

// TurnYieldArgs end one turn: status done, blocked or handoff (with To), an optional
// note, and for an ask the answer record (Value).
type TurnYieldArgs struct {
	GoalID string          `json:"goalId"`
	Status string          `json:"status"`
	To     string          `json:"to,omitempty"`
	Note   string          `json:"note,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`
}

// TurnYieldResult answers turn-yield: the goal's state once yielded.
type TurnYieldResult struct {
	GoalID string `json:"goalId"`
	State  string `json:"state"` // succeeded, failed, cancelled, expired
}

// TurnPending lists the caller's own pending turns.
func (c *Client) TurnPending(ctx context.Context) (TurnPendingResult, error) {
	var out TurnPendingResult
	err := c.Call(ctx, "turn-pending", struct{}{}, &out)
	return out, err
}

// TurnYield ends one of the caller's own turns.
func (c *Client) TurnYield(ctx context.Context, a TurnYieldArgs) (TurnYieldResult, error) {
	var out TurnYieldResult
	err := c.Call(ctx, "turn-yield", a, &out)
	return out, err
}
