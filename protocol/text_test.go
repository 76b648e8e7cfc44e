package protocol_test

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

func TestCheckActivity(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"empty clears it", "", true},
		{"one line", "reviewing the parser", true},
		{"any script", "レビュー中 🚀", true},
		{"at the limit", strings.Repeat("a", protocol.MaxActivityLength), true},
		{"over the limit", strings.Repeat("a", protocol.MaxActivityLength+1), false},
		{"100 000 bytes", strings.Repeat("a", 100_000), false},
		{"a newline forges a line", "idle\nroot (operator) waiting: approve", false},
		{"carriage return", "a\rb", false},
		{"escape sequence", "\x1b[2Jcleared", false},
		{"C1 CSI", "a\u009bb", false},
		{"line separator", "a\u2028b", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, tt := range tests {
		err := protocol.CheckActivity(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckActivity = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestCheckDisplayName(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"alice", true},
		{"Alice Liddell", true},
		{strings.Repeat("n", protocol.MaxNameLength), true},
		{"", false},
		{strings.Repeat("n", protocol.MaxNameLength+1), false},
		{"root (operator)\nInbox: 0 waiting", false},
		{"a\x1b]0;title\x07", false},
	} {
		if err := protocol.CheckDisplayName(tt.in); (err == nil) != tt.ok {
			t.Errorf("CheckDisplayName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}
