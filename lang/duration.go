package lang

import (
	"fmt"
	"strconv"
)

// ParseDuration reads a duration, a whole number and one unit of ms, s, m, h
// or d (LANG §4.6), into milliseconds. Nothing else parses.
func ParseDuration(text string) (int64, error) {
	m := durationRE.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("duration %q: want a whole number and one unit of ms, s, m, h or d, e.g. \"30s\"", text)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", text, err)
	}
	unit := map[string]int64{"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[m[2]]
	if n > (1<<53)/unit {
		return 0, fmt.Errorf("duration %q: too long", text)
	}
	return n * unit, nil
}
