package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

var normalizeChannelCases = []struct {
	in   string
	want string // "" means NormalizeChannel must fail
}{
	{"team", "team"},
	{"team.backend", "team.backend"},
	{"team.backend.db", "team.backend.db"},
	{" team . backend ", "team.backend"},
	{"team..backend", "team.backend"}, // empty segments are dropped
	{".team.", "team"},
	{". .team. . .", "team"},
	{"team/backend.x y", "team_backend.x_y"}, // each segment sanitised
	{"Team-A_1", "Team-A_1"},
	{"🚀.é", "__._"},
	{"team.\u00a0*\u00a0", "team.*"},

	// Wildcards survive only as whole segments, and > only at the end.
	{"team.*", "team.*"},
	{"*.backend", "*.backend"},
	{"*", "*"},
	{"*.*", "*.*"},
	{"team.>", "team.>"},
	{"team. > ", "team.>"},
	{">", ">"},
	{"*.>", "*.>"},
	{"team.>.", "team.>"},  // > is last once the empty segment is dropped
	{"team.>. ", "team.>"}, //
	{"team.*x", "team._x"}, // not a whole segment
	{"team.x>", "team.x_"},
	{"team.**", "team.__"},
	{"team.>>", "team.__"},
	{"team.>.x", ""}, // > in the middle is refused, not rewritten to _
	{">.x", ""},
	{">.>", ""},
	{"a.>..b", ""},

	// Nothing left.
	{"", ""},
	{".", ""},
	{"...", ""},
	{" . \t. ", ""},
	{"\ufeff", ""},
}

func TestNormalizeChannel(t *testing.T) {
	for _, tt := range normalizeChannelCases {
		got, err := protocol.NormalizeChannel(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("NormalizeChannel(%q) = %q, want an error", tt.in, got)
			} else if !errors.Is(err, protocol.ErrInvalidChannel) {
				t.Errorf("NormalizeChannel(%q) error %v does not wrap ErrInvalidChannel", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeChannel(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		if err := protocol.CheckChannelPattern(got); err != nil {
			t.Errorf("NormalizeChannel(%q) = %q, which CheckChannelPattern refuses: %v", tt.in, got, err)
		}
		if again, err := protocol.NormalizeChannel(got); err != nil || again != got {
			t.Errorf("NormalizeChannel is not idempotent on %q: %q then %q, %v", tt.in, got, again, err)
		}
	}
}

func TestNormalizeChannelLength(t *testing.T) {
	max := strings.Repeat("a", protocol.MaxChannelLength)
	if got, err := protocol.NormalizeChannel(max); err != nil || got != max {
		t.Errorf("a %d-byte channel: %v", len(max), err)
	}
	if _, err := protocol.NormalizeChannel(max + "a"); !errors.Is(err, protocol.ErrInvalidChannel) {
		t.Errorf("a %d-byte channel: error %v, want ErrInvalidChannel", len(max)+1, err)
	}
	dotted := strings.Repeat("a.", protocol.MaxChannelLength/2) + "a" // 4097 bytes
	if _, err := protocol.NormalizeChannel(dotted); !errors.Is(err, protocol.ErrInvalidChannel) {
		t.Errorf("a %d-byte dotted channel: error %v, want ErrInvalidChannel", len(dotted), err)
	}
	// The limit is on the result: dropped empty segments and trimmed space do not count.
	padded := strings.Repeat(".", 5000) + " team " + strings.Repeat(".", 5000)
	if got, err := protocol.NormalizeChannel(padded); err != nil || got != "team" {
		t.Errorf("a padded channel = %q, %v; want %q", got, err, "team")
	}
}

func TestCheckChannelPattern(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"team", true},
		{"team.backend", true},
		{"a-b_c.D9", true},
		{"team.*", true},
		{"*", true},
		{">", true},
		{"team.>", true},
		{"*.*.>", true},
		{"*.backend", true},
		{strings.Repeat("a", protocol.MaxChannelLength), true},

		{"", false},
		{"foo/bar", false}, // refused, never quietly granted as foo_bar
		{"foo bar", false},
		{"team..backend", false},
		{".team", false},
		{"team.", false},
		{".", false},
		{"team.>.x", false},
		{">.x", false},
		{">.>", false},
		{"team.>>", false},
		{"team.*x", false},
		{"team.x>", false},
		{"équipe", false},
		{"team\n", false},
		{" team", false},
		{protocol.ChannelDefaultsKey, false}, // the registry defaults key can never be a channel
		{strings.Repeat("a", protocol.MaxChannelLength+1), false},
	}
	for _, tt := range tests {
		err := protocol.CheckChannelPattern(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("CheckChannelPattern(%.40q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, protocol.ErrInvalidChannel) {
			t.Errorf("CheckChannelPattern(%.40q) error %v does not wrap ErrInvalidChannel", tt.in, err)
		}
	}
}

func TestCheckConcreteChannel(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"team", true},
		{"team.backend", true},
		{"a-b.c_d", true},

		{"team.*", false},
		{"team.>", false},
		{"*", false},
		{">", false},
		{"*.backend", false},
		{"foo/bar", false},
		{"", false},
		{"a..b", false},
	}
	for _, tt := range tests {
		err := protocol.CheckConcreteChannel(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("CheckConcreteChannel(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, protocol.ErrInvalidChannel) {
			t.Errorf("CheckConcreteChannel(%q) error %v does not wrap ErrInvalidChannel", tt.in, err)
		}
	}
}

func TestChannelMatches(t *testing.T) {
	tests := []struct {
		pattern, ch string
		want        bool
	}{
		{"team", "team", true},
		{"team.backend", "team.backend", true},
		{"team", "team.backend", false},
		{"team.backend", "team", false},
		{"team", "teams", false},

		{"team.>", "team", false}, // NATS: a.> does not match a
		{"review.>", "review", false},
		{"team.>", "team.backend", true},
		{"team.>", "team.backend.db", true},
		{">", "team", true},
		{">", "team.backend", true},
		{"*.*.>", "a.b", false},
		{"*.*.>", "a.b.c", true},

		{"team.*", "team.backend", true}, // * is exactly one level
		{"team.*", "team.backend.db", false},
		{"team.*", "team", false},
		{"*", "team", true},
		{"*", "team.backend", false},
		{"*.backend", "team.backend", true},
		{"*.backend", "team.frontend", false},
		{"team.*.db", "team.backend.db", true},
		{"team.*.db", "team.backend.cache", false},
	}
	for _, tt := range tests {
		if got := protocol.ChannelMatches(tt.pattern, tt.ch); got != tt.want {
			t.Errorf("ChannelMatches(%q, %q) = %v, want %v", tt.pattern, tt.ch, got, tt.want)
		}
	}
}

func FuzzNormalizeChannel(f *testing.F) {
	for _, c := range normalizeChannelCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ch, err := protocol.NormalizeChannel(s)
		if err != nil {
			if !errors.Is(err, protocol.ErrInvalidChannel) {
				t.Fatalf("NormalizeChannel(%q) error %v does not wrap ErrInvalidChannel", s, err)
			}
			return
		}
		if err := protocol.CheckChannelPattern(ch); err != nil {
			t.Fatalf("NormalizeChannel(%q) = %q, which CheckChannelPattern refuses: %v", s, ch, err)
		}
		if again, err := protocol.NormalizeChannel(ch); err != nil || again != ch {
			t.Fatalf("NormalizeChannel is not idempotent on %q: %q then %q, %v", s, ch, again, err)
		}
		if protocol.CheckConcreteChannel(ch) == nil && !protocol.ChannelMatches(ch, ch) {
			t.Fatalf("concrete channel %q does not match itself", ch)
		}
	})
}
