package protocol

import (
	"errors"
	"fmt"
	"time"
)

// MaxReplayWindow is the longest replay window, 106751d (about 292 years): the most whole
// days a time.Duration holds. A longer window would wrap around to a negative duration and
// replay nothing; to replay all history, set no window.
const MaxReplayWindow = 106751 * 24 * time.Hour

// MaxReplayWindowText is MaxReplayWindow as a channel's replayWindow writes it.
const MaxReplayWindowText = "106751d"

// ErrZeroReplayWindow reports a replay window of zero (0s, 0m, 0h or 0d), which would
// replay nothing: that is replay off, not a window.
var ErrZeroReplayWindow = errors.New("a window of 0 replays nothing: turn replay off instead")

// ErrReplayWindowTooLong reports a replay window over MaxReplayWindow.
var ErrReplayWindowTooLong = errors.New("over the longest window, " + MaxReplayWindowText + " (about 292 years): for all history set no window")

// ParseReplayWindow reads a channel's replay window, ^[0-9]+[smhd]$ (seconds, minutes,
// hours or days), such as 30s, 15m, 2h or 7d. It refuses any other text, a zero window
// (ErrZeroReplayWindow) and one over MaxReplayWindow (ErrReplayWindowTooLong), so what
// it returns is positive and exactly the number times the unit.
func ParseReplayWindow(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, errWindowSyntax
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, errWindowSyntax
	}
	limit := int64(MaxReplayWindow / unit)
	var n int64
	over := false
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return 0, errWindowSyntax
		}
		if !over {
			n = n*10 + int64(c-'0')
			over = n > limit // n stays far below 2^63: limit*10+9 fits
		}
	}
	switch {
	case over:
		return 0, ErrReplayWindowTooLong
	case n == 0:
		return 0, ErrZeroReplayWindow
	}
	return time.Duration(n) * unit, nil
}

// errWindowSyntax reports text that is not digits then s, m, h or d.
var errWindowSyntax = fmt.Errorf("want digits then s, m, h or d (like 30m or 7d), at most %s", MaxReplayWindowText)
