package protocol_test

import (
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

func TestChannelCovers(t *testing.T) {
	for _, tt := range []struct {
		p, q string
		want bool
	}{
		{"general", "general", true},
		{"team.>", "team.backend", true},
		{"team.>", "team.*", true},
		{"team.>", "team.a.>", true},
		{"team.>", "team", false},
		{"team.*", "team.>", false},
		{"team.*", "team.a", true},
		{"team.*", "team.a.b", false},
		{">", "anything.at.all", true},
		{"*", "a.b", false},
		{"a.b", "a.*", false},
	} {
		if got := protocol.ChannelCovers(tt.p, tt.q); got != tt.want {
			t.Errorf("ChannelCovers(%q, %q) = %v, want %v", tt.p, tt.q, got, tt.want)
		}
		// For a concrete q, covering is matching.
		if protocol.CheckConcreteChannel(tt.q) == nil && protocol.ChannelCovers(tt.p, tt.q) != protocol.ChannelMatches(tt.p, tt.q) {
			t.Errorf("ChannelCovers and ChannelMatches disagree on %q, %q", tt.p, tt.q)
		}
	}
	if !protocol.ChannelCovered([]string{"x", "team.>"}, "team.a") || protocol.ChannelCovered(nil, "a") {
		t.Error("ChannelCovered")
	}
}
