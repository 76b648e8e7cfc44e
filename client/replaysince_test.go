package client

import (
	"testing"
	"time"
)

// A window replays from now minus it; a window too long for a time.Duration replays all
// history (it wrapped to a negative duration, and so a time after now, replaying nothing);
// a zero window replays nothing, as it did.
func TestReplaySince(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	for w, want := range map[string]time.Time{
		"":            {},
		"7d":          now.Add(-7 * 24 * time.Hour),
		"106751d":     now.Add(-106751 * 24 * time.Hour),
		"106752d":     {},
		"2147483648d": {},
		"2147483649d": {},
		"0s":          now,
		"0d":          now,
		"7w":          {},
	} {
		if got := replaySince(w, now); !got.Equal(want) {
			t.Errorf("replaySince(%q) = %v, want %v", w, got, want)
		}
	}
}
