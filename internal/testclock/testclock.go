// Package testclock is the one instant tests pin their injected clocks to.
//
// A test that pins a date must inject that clock into everything it checks: an issuer
// on the pinned clock and a verifier on the real one pass only while the real date is
// near the pinned one. Setting AheadEnv moves the pinned instant back, which is how the
// suite looks when it runs that much later, so such a test fails today instead of next
// year. CI runs the suite once with AheadEnv=8760h.
package testclock

import (
	"os"
	"testing"
	"time"
)

// AheadEnv names the environment variable that runs the suite as if the real clock were
// that far ahead of the pinned instant: a Go duration such as "8760h" (a year).
const AheadEnv = "COTAL_TEST_CLOCK_AHEAD"

// Epoch is the pinned instant, 2026-11-30 12:00 UTC, moved back by AheadEnv when set.
func Epoch(t testing.TB) time.Time {
	t.Helper()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v := os.Getenv(AheadEnv)
	if v == "" {
		return base
	}
	ahead, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: want a Go duration such as 8760h: %v", AheadEnv, v, err)
	}
	return base.Add(-ahead)
}
