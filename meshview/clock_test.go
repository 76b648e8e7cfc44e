package meshview_test

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
)

// meshtestClock is a fixed clock at the tests' epoch.
func meshtestClock(t testing.TB) func() time.Time {
	at := testclock.Epoch(t)
	return func() time.Time { return at }
}
