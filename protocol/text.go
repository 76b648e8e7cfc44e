package protocol

import (
	"fmt"
	"unicode/utf8"
)

// MaxActivityLength bounds a presence activity line (Presence.Activity), in UTF-8 bytes.
// The reference sets no bound; a peer that writes a longer line is shown cut to this
// length (see docs/interop.md).
const MaxActivityLength = 256

// CheckDisplayName checks a card's display name: 1 to MaxNameLength bytes of UTF-8 on one
// line, with no control character.
func CheckDisplayName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Errorf("name %q: want 1 to %d bytes", name, MaxNameLength)
	}
	if !OneLine(name) {
		return fmt.Errorf("name %q: a name is one line of text, without line breaks or control characters", name)
	}
	return nil
}

// CheckActivity checks a presence activity line: at most MaxActivityLength bytes of UTF-8
// on one line, with no control character. The empty string (no activity) is valid.
func CheckActivity(activity string) error {
	if len(activity) > MaxActivityLength {
		return fmt.Errorf("activity is %d bytes, over the %d-byte limit: say in one short line what you are doing", len(activity), MaxActivityLength)
	}
	if !OneLine(activity) {
		return fmt.Errorf("activity %q: write one line, without line breaks or control characters", activity)
	}
	return nil
}

// OneLine reports whether s is valid UTF-8 with no control character (C0, DEL, C1) and
// no line or paragraph separator, so it shows as one line of text.
func OneLine(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}
