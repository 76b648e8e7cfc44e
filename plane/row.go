package plane

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// Key is the plane claim's key in the space's auth bucket (provision.BucketAuth).
const Key = "plane"

// Version is the row schema this package reads and writes.
const Version = 1

// Claim states of a row.
const (
	StateHeld     = "held"     // an auth service holds the plane
	StateReleased = "released" // the last holder closed cleanly; anyone may claim it
)

// Row is the plane claim as stored: a JSON object, schema v1 (the reference's
// implementations/auth/src/plane-claim.ts). It is written with exactly these keys.
type Row struct {
	V          int                `json:"v"`          // Version
	Generation uint64             `json:"generation"` // >= 1, +1 per held write
	ClaimID    string             `json:"claimId"`    // random per claim: a new holder's id differs
	State      string             `json:"state"`      // StateHeld or StateReleased
	Ledger     protocol.ConnTuple `json:"ledger"`     // the holder's ledger scanner connection
	Records    protocol.ConnTuple `json:"records"`    // the holder's records scanner connection
	OpenedAt   Instant            `json:"openedAt"`   // when the claim was taken
}

// Instant is a time in unix milliseconds, written as the reference writes openedAt (an
// ISO-8601 string, JavaScript's toISOString) and read in that form or, as rows of earlier
// Go releases hold it, as a number of unix milliseconds.
type Instant int64

// MarshalJSON writes the instant as "2006-01-02T15:04:05.000Z".
func (t Instant) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z"))
}

// UnmarshalJSON reads an ISO-8601 string or a number of unix milliseconds.
func (t *Instant) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("openedAt %q: want an ISO-8601 time", s)
		}
		*t = Instant(at.UnixMilli())
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("openedAt %s: want an ISO-8601 time or unix milliseconds", b)
	}
	*t = Instant(ms)
	return nil
}

// Tuples returns the row's connection tuples as liveness oracle args.
func (r Row) Tuples() protocol.LivenessArgs {
	return protocol.LivenessArgs{Ledger: r.Ledger, Records: r.Records}
}

// Encode returns the row's JSON.
func (r Row) Encode() []byte {
	b, _ := json.Marshal(r) // a struct of strings and integers always encodes
	return b
}

// DecodeRow reads a stored row: one JSON object of schema v1 with a known state, a
// generation of at least 1, a claim id and two complete tuples; anything else is an
// error. Unknown keys are ignored (issue 13 item 12: a row another implementation wrote
// may carry fields a later version of the schema adds without bumping v).
func DecodeRow(b []byte) (Row, error) {
	var r Row
	if err := json.Unmarshal(b, &r); err != nil {
		return Row{}, fmt.Errorf("decode plane row: %w", err)
	}
	if err := r.check(); err != nil {
		return Row{}, fmt.Errorf("decode plane row: %w", err)
	}
	return r, nil
}

// check validates a decoded row.
func (r Row) check() error {
	switch {
	case r.V != Version:
		return fmt.Errorf("schema version %d: want %d", r.V, Version)
	case r.Generation == 0:
		return errors.New("generation 0: want 1 or more")
	case r.ClaimID == "":
		return errors.New("no claim id")
	case r.State != StateHeld && r.State != StateReleased:
		return fmt.Errorf("state %q: want %s or %s", r.State, StateHeld, StateReleased)
	case r.OpenedAt <= 0:
		return fmt.Errorf("openedAt %d: want a time after 1970", r.OpenedAt)
	}
	for name, t := range map[string]protocol.ConnTuple{"ledger": r.Ledger, "records": r.Records} {
		if err := checkTuple(t); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// maxSafeInt is the largest integer a JSON number carries exactly (2^53 - 1); the oracle
// refuses a larger cid.
const maxSafeInt = 1<<53 - 1

// checkTuple refuses a tuple the liveness oracle would refuse to look up.
func checkTuple(t protocol.ConnTuple) error {
	switch {
	case t.ServerID == "" || len(t.ServerID) > 128:
		return errors.New("serverId: want 1 to 128 characters")
	case t.CID == 0 || t.CID > maxSafeInt:
		return fmt.Errorf("cid %d: want a positive safe integer", t.CID)
	case !validUserNkey(t.UserNkey):
		return fmt.Errorf("userNkey %q: want a user nkey (U and 55 base32 letters)", t.UserNkey)
	}
	return nil
}

// validUserNkey reports whether s looks like a user public nkey: U and 55 base32 letters.
func validUserNkey(s string) bool {
	if len(s) != 56 || s[0] != 'U' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
