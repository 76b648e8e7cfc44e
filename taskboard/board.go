// Package taskboard is a space's shared task list: the KV bucket cotal_tasks_<space>,
// written so the broker itself enforces who may change what. Every key ends in the
// principal that wrote it, and an agent credential may write only keys ending in its own
// principal (trust.ProfileAgent), so no agent can forge another's claim or status:
//
//	t.<id>.<owner>.<actor>   the task, written once by its creator
//	c.<id>.<owner>.<actor>   a claim, written once by the claimer
//	s.<id>.<owner>.<actor>   that principal's latest status for the task (its lease)
//
// The board is the fold of those rows in stream order (see Fold): the first claim on an
// open task wins, and stream order is total, so exactly one of any number of racing
// claimers holds it. A holder renews its lease by rewriting its status row; a claim whose
// holder wrote nothing for Lease lapses and the task is open again.
package taskboard

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// Bucket names a space's task board bucket.
func Bucket(space string) string { return "cotal_tasks_" + space }

// Lease is how long a claim lives after its holder's last write (claim or status).
const Lease = 2 * time.Minute

// Statuses, the states of a task.
const (
	Open      = "open" // nobody holds it
	Claimed   = "claimed"
	Working   = "working"
	Blocked   = "blocked"
	Done      = "done"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Statuses lists every state, in lifecycle order.
var Statuses = []string{Open, Claimed, Working, Blocked, Done, Failed, Cancelled}

// Limits of a task's text.
const (
	MaxTitle = 200
	MaxBody  = 16 << 10
	MaxNote  = 2000
)

// Errors a caller can match.
var (
	ErrNotFound = errors.New("no such task")
	ErrHeld     = errors.New("the task is held by another")
	ErrNotYours = errors.New("only the task's holder may change it")
	ErrFinished = errors.New("the task is finished")
	ErrBadInput = errors.New("bad input")
)

// Terminal reports whether status ends a task.
func Terminal(status string) bool {
	return status == Done || status == Failed || status == Cancelled
}

func active(status string) bool {
	return status == Claimed || status == Working || status == Blocked
}

// ValidStatus reports whether s is one of Statuses.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// ValidID reports whether id is a task id: 1 to 32 of a-z 0-9.
func ValidID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// Row kinds, the first token of a key.
const (
	kindTask   = "t"
	kindClaim  = "c"
	kindStatus = "s"
)

// key is the key of one row.
func key(kind, id string, p protocol.Principal) string {
	return kind + "." + id + "." + p.String()
}

// parseKey splits a key into its kind, task id and writer; ok is false for a key that is
// not a board row (ignored by the fold).
func parseKey(k string) (kind, id string, p protocol.Principal, ok bool) {
	parts := strings.Split(k, ".")
	if len(parts) != 4 || !ValidID(parts[1]) {
		return "", "", protocol.Principal{}, false
	}
	p = protocol.Principal{Owner: parts[2], Actor: parts[3]}
	if p.Validate() != nil {
		return "", "", protocol.Principal{}, false
	}
	switch parts[0] {
	case kindTask, kindClaim, kindStatus:
		return parts[0], parts[1], p, true
	}
	return "", "", protocol.Principal{}, false
}

// TaskRow is the value of a t.<id>.<owner>.<actor> row.
type TaskRow struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Body     string    `json:"body,omitempty"`
	Role     string    `json:"role,omitempty"`
	Assignee string    `json:"assignee,omitempty"` // dot-form principal the creator meant it for
	At       time.Time `json:"at"`
}

// ClaimRow is the value of a c.<id>.<owner>.<actor> row.
type ClaimRow struct {
	At time.Time `json:"at"`
}

// StatusRow is the value of an s.<id>.<owner>.<actor> row.
type StatusRow struct {
	Status string    `json:"status"`
	Note   string    `json:"note,omitempty"`
	At     time.Time `json:"at"`
}

// Check validates a new task's fields.
func (r TaskRow) Check() error {
	switch {
	case strings.TrimSpace(r.Title) == "" || len(r.Title) > MaxTitle || strings.ContainsAny(r.Title, "\r\n"):
		return fmt.Errorf("%w: title: want 1 to %d characters on one line", ErrBadInput, MaxTitle)
	case len(r.Body) > MaxBody:
		return fmt.Errorf("%w: body: %d bytes, want at most %d", ErrBadInput, len(r.Body), MaxBody)
	case r.Role != "" && protocol.CheckRole(r.Role) != nil:
		return fmt.Errorf("%w: role: %w", ErrBadInput, protocol.CheckRole(r.Role))
	}
	if r.Assignee != "" {
		if _, err := protocol.ParsePrincipal(r.Assignee); err != nil {
			return fmt.Errorf("%w: assignee: %w", ErrBadInput, err)
		}
	}
	return nil
}

// HeldBy lists the ids of the unfinished tasks each holder (a principal, owner.actor)
// holds, in the order of tasks.
func HeldBy(tasks []Task) map[string][]string {
	by := map[string][]string{}
	for _, t := range tasks {
		if t.Holder != "" && active(t.Status) {
			by[t.Holder] = append(by[t.Holder], t.ID)
		}
	}
	return by
}
