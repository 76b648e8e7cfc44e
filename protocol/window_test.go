package protocol_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

const day = 24 * time.Hour

var windows = []struct {
	in   string
	want time.Duration
	err  error // nil: any refusal when want is 0
}{
	{"30s", 30 * time.Second, nil},
	{"15m", 15 * time.Minute, nil},
	{"2h", 2 * time.Hour, nil},
	{"7d", 7 * day, nil},
	{"007d", 7 * day, nil}, // the wire grammar allows leading zeros
	{"106751d", protocol.MaxReplayWindow, nil},
	{"2562024h", protocol.MaxReplayWindow, nil},
	{"153721440m", protocol.MaxReplayWindow, nil},
	{"9223286400s", protocol.MaxReplayWindow, nil},
	// over the longest window: these wrapped to a negative or a short duration
	{"106752d", 0, protocol.ErrReplayWindowTooLong},
	{"2147483648d", 0, protocol.ErrReplayWindowTooLong},
	{"2147483649d", 0, protocol.ErrReplayWindowTooLong},
	{"2562025h", 0, protocol.ErrReplayWindowTooLong},
	{"9223286401s", 0, protocol.ErrReplayWindowTooLong},
	{"99999999999999999999999999d", 0, protocol.ErrReplayWindowTooLong},
	// zero is replay off, however it is written
	{"0s", 0, protocol.ErrZeroReplayWindow},
	{"0d", 0, protocol.ErrZeroReplayWindow},
	{"000m", 0, protocol.ErrZeroReplayWindow},
	// not the grammar
	{"", 0, nil}, {"0", 0, nil}, {"7", 0, nil}, {"d", 0, nil}, {"7w", 0, nil}, {"-7d", 0, nil},
	{"+7d", 0, nil}, {"7.5h", 0, nil}, {" 7d", 0, nil}, {"7d ", 0, nil}, {"1h30m", 0, nil}, {"7D", 0, nil},
	{"٣d", 0, nil}, // a digit of another script
}

func TestParseReplayWindow(t *testing.T) {
	for _, c := range windows {
		got, err := protocol.ParseReplayWindow(c.in)
		switch {
		case c.want != 0 && (err != nil || got != c.want):
			t.Errorf("ParseReplayWindow(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.want == 0 && err == nil:
			t.Errorf("ParseReplayWindow(%q) = %v, accepted; want a refusal", c.in, got)
		case c.err != nil && !errors.Is(err, c.err):
			t.Errorf("ParseReplayWindow(%q): %v; want %v", c.in, err, c.err)
		}
	}
	if _, err := protocol.ParseReplayWindow("106752d"); err == nil || !strings.Contains(err.Error(), "106751d") {
		t.Errorf("the refusal of a too-long window names the longest: %v", err)
	}
}

// FuzzParseReplayWindow: never panic; an accepted window is positive, at most the
// longest, and exactly its number times its unit (it round-trips).
func FuzzParseReplayWindow(f *testing.F) {
	for _, c := range windows {
		f.Add(c.in)
	}
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': day}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := protocol.ParseReplayWindow(s)
		if err != nil {
			return
		}
		if d <= 0 || d > protocol.MaxReplayWindow {
			t.Fatalf("%q parsed to %v: not in (0, %v]", s, d, protocol.MaxReplayWindow)
		}
		unit := units[s[len(s)-1]]
		if unit == 0 || d%unit != 0 {
			t.Fatalf("%q parsed to %v, not a whole number of its unit", s, d)
		}
		back := strconv.FormatInt(int64(d/unit), 10) + s[len(s)-1:]
		if back != strings.TrimLeft(s[:len(s)-1], "0")+s[len(s)-1:] {
			t.Fatalf("%q parsed to %v, which writes %q", s, d, back)
		}
	})
}
