package plane

import (
	"errors"
	"fmt"
)

// Reasons a plane claim is refused (the detail of ai.cotal.auth.plane-claim-refused).
const (
	ReasonLivePeer   = "live-peer"  // another auth service holds the plane and is live
	ReasonUnknown    = "unknown"    // the holder could not be proved gone
	ReasonConcurrent = "concurrent" // the row changed under two claim attempts in a row
	ReasonCorrupt    = "corrupt"    // the row does not decode; an operator must repair it
	ReasonLost       = "lost"       // the row no longer names this claim
)

// Refusal is a plane claim (or release) refused: the space, the reason, what was found
// and what the operator can do. Callers match it with errors.As or Refused.
type Refusal struct {
	Space  string // the space whose plane was asked for
	Reason string // one of the Reason constants
	Why    string // what was found, for a person
	Next   string // what the operator can do
	Err    error  // the cause underneath, if any (a decode or oracle error)
}

// Error reads: plane claim of space "team" refused (live-peer): <why>; <next>.
func (r *Refusal) Error() string {
	s := fmt.Sprintf("plane claim of space %q refused (%s): %s", r.Space, r.Reason, r.Why)
	if r.Next != "" {
		s += "; " + r.Next
	}
	return s
}

// Unwrap returns the cause underneath the refusal.
func (r *Refusal) Unwrap() error { return r.Err }

// Refused reports whether err is, or wraps, a *Refusal with reason.
func Refused(err error, reason string) bool {
	var r *Refusal
	return errors.As(err, &r) && r.Reason == reason
}

// repairCommand is the operator's repair of a corrupt row: delete it (the next claim then
// creates generation 1). The bucket denies message deletion, not a KV delete marker.
func repairCommand(space string) string {
	return "nats kv del " + bucket(space) + " " + Key
}
