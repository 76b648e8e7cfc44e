package protocol

import "testing"

func TestSeatStateMoves(t *testing.T) {
	all := []SeatState{SeatStarting, SeatRunning, SeatStopping, SeatExited}
	legal := map[[2]SeatState]bool{
		{SeatStarting, SeatRunning}: true, {SeatStarting, SeatStopping}: true, {SeatStarting, SeatExited}: true,
		{SeatRunning, SeatStopping}: true, {SeatRunning, SeatExited}: true,
		{SeatStopping, SeatExited}: true,
	}
	for _, from := range all {
		if !from.Valid() {
			t.Fatalf("%q is not valid", from)
		}
		for _, to := range all {
			got, err := from.Move(to)
			if want := legal[[2]SeatState{from, to}]; want != (err == nil) {
				t.Errorf("%s -> %s: err %v, want legal %v", from, to, err, want)
			} else if err == nil && got != to {
				t.Errorf("%s -> %s gave %s", from, to, got)
			} else if err != nil && got != from {
				t.Errorf("%s -> %s refused but left %s", from, to, got)
			}
		}
	}
	if SeatState("zombie").Valid() || !SeatExited.Ended() || SeatStopping.Ended() {
		t.Fatal("Valid or Ended is wrong")
	}
	if _, err := SeatState("zombie").Move(SeatRunning); err == nil {
		t.Fatal("an unknown state moved")
	}
}
