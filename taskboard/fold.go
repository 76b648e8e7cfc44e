package taskboard

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// Row is the latest message of one key of the bucket.
type Row struct {
	Key     string
	Value   []byte
	Seq     uint64
	Deleted bool // a delete or purge marker: the row is gone
}

// Task is one task as the fold of its rows shows it.
type Task struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	Body       string    `json:"body,omitempty"`
	Role       string    `json:"role,omitempty"`
	Assignee   string    `json:"assignee,omitempty"`
	Creator    string    `json:"creator"`
	Status     string    `json:"status"`
	Holder     string    `json:"holder,omitempty"`
	Note       string    `json:"note,omitempty"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"` // while held and unfinished: when the claim lapses without renewal
	Lapsed     string    `json:"lapsed,omitempty"`    // the last holder whose claim lapsed, if any
	seq        uint64
}

type event struct {
	kind string
	by   protocol.Principal
	seq  uint64
	at   time.Time
	st   StatusRow
}

// Fold computes every task from the bucket's rows at instant now with the given lease,
// in creation order. Rows that do not parse, claims and statuses of unknown tasks, and
// events that the state machine refuses are ignored, so a writer can change only what
// its own rows may change:
//
//   - the first claim on an open task makes its writer the holder (status claimed); a
//     claim on a task whose holder wrote nothing for lease also wins (the old claim lapsed);
//     a task with an assignee is claimed only by that principal;
//   - the holder's status row sets the status (open releases the task);
//   - a non-holder's status row counts only as cancelled, by the creator on any unfinished
//     task, by anyone on an open one;
//   - done, failed and cancelled are final;
//   - at now, an unfinished held task whose holder wrote nothing for lease is open again.
func Fold(rows []Row, now time.Time, lease time.Duration) []Task {
	tasks := map[string]*Task{}
	events := map[string][]event{}
	last := map[string]time.Time{} // "<id> <principal>" -> that writer's latest claim or status time
	for _, r := range rows {
		if r.Deleted {
			continue
		}
		kind, id, by, ok := parseKey(r.Key)
		if !ok {
			continue
		}
		switch kind {
		case kindTask:
			var t TaskRow
			if json.Unmarshal(r.Value, &t) != nil || t.ID != id || t.Check() != nil {
				continue
			}
			if have, ok := tasks[id]; ok && have.seq < r.Seq {
				continue // the first writer of an id keeps it
			}
			tasks[id] = &Task{ID: id, Title: t.Title, Body: t.Body, Role: t.Role, Assignee: t.Assignee,
				Creator: by.String(), Status: Open, Created: t.At, Updated: t.At, seq: r.Seq}
		case kindClaim:
			var c ClaimRow
			if json.Unmarshal(r.Value, &c) != nil {
				continue
			}
			events[id] = append(events[id], event{kind: kind, by: by, seq: r.Seq, at: c.At})
			noteLast(last, id, by, c.At)
		case kindStatus:
			var s StatusRow
			if json.Unmarshal(r.Value, &s) != nil || !ValidStatus(s.Status) || len(s.Note) > MaxNote {
				continue
			}
			events[id] = append(events[id], event{kind: kind, by: by, seq: r.Seq, at: s.At, st: s})
			noteLast(last, id, by, s.At)
		}
	}
	out := make([]Task, 0, len(tasks))
	for id, t := range tasks {
		evs := events[id]
		sort.Slice(evs, func(i, j int) bool { return evs[i].seq < evs[j].seq })
		lapsed := func(holder string, at time.Time) bool {
			return last[id+" "+holder].Add(lease).Before(at)
		}
		for _, e := range evs {
			if e.seq < t.seq || Terminal(t.Status) {
				continue
			}
			who := e.by.String()
			switch e.kind {
			case kindClaim:
				if who == t.Holder || (t.Assignee != "" && t.Assignee != who) {
					continue
				}
				if t.Status == Open || (active(t.Status) && lapsed(t.Holder, e.at)) {
					if t.Holder != "" {
						t.Lapsed = t.Holder
					}
					t.Holder, t.Status, t.Note, t.Updated = who, Claimed, "", e.at
				}
			case kindStatus:
				switch {
				case who == t.Holder && e.st.Status == Open:
					t.Holder, t.Status, t.Note, t.Updated = "", Open, e.st.Note, e.at
				case who == t.Holder:
					t.Status, t.Note, t.Updated = e.st.Status, e.st.Note, e.at
				case e.st.Status == Cancelled && (who == t.Creator || t.Status == Open):
					t.Status, t.Note, t.Updated = Cancelled, e.st.Note, e.at
				}
			}
		}
		if active(t.Status) {
			t.LeaseUntil = last[id+" "+t.Holder].Add(lease)
			if t.LeaseUntil.Before(now) {
				t.Lapsed, t.Holder, t.Status, t.LeaseUntil = t.Holder, "", Open, time.Time{}
			}
		}
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func noteLast(last map[string]time.Time, id string, by protocol.Principal, at time.Time) {
	k := id + " " + by.String()
	if at.After(last[k]) {
		last[k] = at
	}
}
