package protocol

import "fmt"

// SeatState is the process state of one seat of the agent manager, as ps shows it (the
// process field of SeatInfo). A seat moves only forward:
//
//	starting -> running -> stopping -> exited
//	starting -> stopping              (a stop while it starts: the start is cancelled)
//	starting -> exited                (the start failed)
//	running  -> exited                (it ended on its own)
//
// Only a running or stopping seat has a process id; a starting one has none yet, so
// nothing is ever signalled on its behalf.
type SeatState string

// Seat states.
const (
	SeatStarting SeatState = "starting" // its run is being prepared: no process yet
	SeatRunning  SeatState = "running"  // its process runs
	SeatStopping SeatState = "stopping" // a stop was asked; it has not ended yet
	SeatExited   SeatState = "exited"   // it has ended (or never started); final
)

// seatMoves lists the legal transitions from each state.
var seatMoves = map[SeatState][]SeatState{
	SeatStarting: {SeatRunning, SeatStopping, SeatExited},
	SeatRunning:  {SeatStopping, SeatExited},
	SeatStopping: {SeatExited},
}

// Valid reports whether s is one of the seat states.
func (s SeatState) Valid() bool {
	switch s {
	case SeatStarting, SeatRunning, SeatStopping, SeatExited:
		return true
	}
	return false
}

// Ended reports whether the seat has ended: its state is final.
func (s SeatState) Ended() bool { return s == SeatExited }

// Move checks the transition from s to next and returns next, or an error naming both
// when the seat may not move that way (an ended seat never moves again).
func (s SeatState) Move(next SeatState) (SeatState, error) {
	for _, n := range seatMoves[s] {
		if n == next {
			return next, nil
		}
	}
	return s, fmt.Errorf("seat state %q cannot become %q", s, next)
}

// The manager's refusal codes: the Code of a MgrReply that is not ok. A program branches
// on them; the Error beside it is for a person.
const (
	MgrCodeDenied   = "permission-denied" // the caller may not do this
	MgrCodeNotFound = "not-found"         // no such seat or persona
	MgrCodeExists   = "already-exists"    // the name is taken
	MgrCodeBad      = "bad-request"       // the request is malformed or cannot be done
	MgrCodeStopped  = "stopped"           // a spawn that a stop cancelled while it started
	MgrCodeInternal = "internal"          // the manager failed
)
