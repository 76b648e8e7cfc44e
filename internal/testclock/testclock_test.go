package testclock

import (
	"testing"
	"time"
)

func TestEpochMovesBack(t *testing.T) {
	t.Setenv(AheadEnv, "")
	base := Epoch(t)
	t.Setenv(AheadEnv, "8760h")
	if got := base.Sub(Epoch(t)); got != 8760*time.Hour {
		t.Fatalf("a year ahead moved the epoch back by %s", got)
	}
}
