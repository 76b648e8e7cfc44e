package protocol_test

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

func TestNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{protocol.StreamChat("main"), "CHAT_main"},
		{protocol.StreamDM("main"), "DM_main"},
		{protocol.StreamTask("main"), "TASK_main"},
		{protocol.BucketPresence("main"), "cotal_presence_main"},
		{protocol.BucketChannels("main"), "cotal_channels_main"},
		{protocol.ConsumerDM(alice, uid26), "dm_" + ownerA + "-alice-" + uid26},
		{protocol.ConsumerDMPrefix(alice), "dm_" + ownerA + "-alice-"},
		{protocol.ConsumerRole("reviewer"), "svc_reviewer"},
		{protocol.ConsumerRole("code review"), "svc_code_review"},
		{protocol.ConsumerHistory(alice, uid26), "chathist_" + ownerA + "-alice-" + uid26},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("name = %q, want %q", tt.got, tt.want)
		}
	}
	if !strings.HasPrefix(protocol.ConsumerDM(alice, uid26), protocol.ConsumerDMPrefix(alice)) {
		t.Error("ConsumerDM does not start with ConsumerDMPrefix")
	}
	// JetStream names may not hold . * > or white space.
	for _, n := range []string{protocol.ConsumerDM(alice, uid26), protocol.ConsumerHistory(devP, uid26), protocol.ConsumerRole("a.b *>")} {
		if strings.ContainsAny(n, ".*> \t") {
			t.Errorf("%q is not a legal JetStream name", n)
		}
	}
}

func TestValidLifecycleUID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{uid26, true},
		{strings.Repeat("a", 26), true},
		{strings.Repeat("z9", 16), true}, // 32
		{strings.Repeat("a", 25), false},
		{strings.Repeat("a", 33), false},
		{strings.Repeat("A", 26), false},
		{strings.Repeat("a", 25) + "-", false},
		{strings.Repeat("a", 25) + "_", false},
		{strings.Repeat("a", 26) + "\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := protocol.ValidLifecycleUID(tt.in); got != tt.want {
			t.Errorf("ValidLifecycleUID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSpaceKey(t *testing.T) {
	tests := []struct{ space, want string }{
		{"prod", "70726f64"},
		{"Prod", "50726f64"}, // case-safe: differs from "prod" on a case-folding file system
		{"a-b_1", "612d625f31"},
		{"", ""},
		{"é", "c3a9"},
	}
	for _, tt := range tests {
		if got := protocol.SpaceKey(tt.space); got != tt.want {
			t.Errorf("SpaceKey(%q) = %q, want %q", tt.space, got, tt.want)
		}
	}
}
