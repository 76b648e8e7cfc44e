package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

const presenceTS = 1710000000000

var uid26 = strings.Repeat("0", 6) + "abcdefghij0123456789"

var presenceRecord = `{"card":{"id":"` + ownerA + `.alice","name":"alice","kind":"agent","role":"planner",
	"description":"plans","tags":["go"],"skills":[{"id":"review","name":"Review"}],
	"meta":{"model":"m1","host":"h"},"protocolVersion":"0.4","owner":"` + ownerA + `","actor":"alice",
	"capabilities":{"streaming":true}},
	"status":"working","ts":1710000000000,"lifecycleUid":"` + uid26 + `",
	"condition":{"code":"rate_limit","source":"harness","message":"slow down","since":1709999999000},
	"environment":{"provider":"docker","ref":"c1"},"activity":"reviewing PR 7","attention":"focus",
	"channelModes":{"team.backend":"quiet","random":"muted"},
	"activeAt":1709999990000,"statusSince":1709999980000,"activitySince":1709999970000,"future":[1]}`

func TestDecodePresence(t *testing.T) {
	p, err := protocol.DecodePresence(ownerA+".alice", []byte(presenceRecord))
	if err != nil {
		t.Fatalf("DecodePresence: %v", err)
	}
	want := protocol.Presence{
		Card: protocol.AgentCard{
			ID: ownerA + ".alice", Name: "alice", Kind: protocol.CardAgent, Role: "planner",
			Description: "plans", Tags: []string{"go"},
			Skills:          []protocol.Skill{{ID: "review", Name: "Review"}},
			Meta:            map[string]any{"model": "m1", "host": "h"},
			ProtocolVersion: protocol.ProtocolVersion, Owner: ownerA, Actor: "alice",
		},
		Status: protocol.StatusWorking, TS: presenceTS, LifecycleUID: uid26,
		Condition:    &protocol.Condition{Code: "rate_limit", Source: "harness", Message: "slow down", Since: 1709999999000},
		Environment:  json.RawMessage(`{"provider":"docker","ref":"c1"}`),
		Activity:     "reviewing PR 7",
		Attention:    protocol.AttentionFocus,
		ChannelModes: map[string]string{"team.backend": "quiet", "random": "muted"},
		ActiveAt:     1709999990000, StatusSince: 1709999980000, ActivitySince: 1709999970000,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("DecodePresence =\n%+v\nwant\n%+v", p, want)
	}
	if err := p.Card.Validate(); err != nil {
		t.Errorf("card does not validate: %v", err)
	}
	if !protocol.ValidLifecycleUID(p.LifecycleUID) {
		t.Errorf("lifecycleUid %q is not valid", p.LifecycleUID)
	}
}

func TestDecodePresenceErrors(t *testing.T) {
	rec := func(cardID, status, ts, extra string) string {
		return `{"card":{"id":"` + cardID + `","name":"n","kind":"agent"},"status":"` + status + `"` + ts + extra + `}`
	}
	key := ownerA + ".alice"
	good := `,"ts":1`
	tests := []struct {
		name, key, in string
		ok            bool
	}{
		{"minimal", key, rec(key, "idle", good, ""), true},
		{"waiting", key, rec(key, "waiting", good, ""), true},
		{"offline", key, rec(key, "offline", good, ""), true},
		{"attention open", key, rec(key, "idle", good, `,"attention":"open"`), true},
		{"attention dnd", key, rec(key, "idle", good, `,"attention":"dnd"`), true},
		{"local key", "local." + nkey, rec("local."+nkey, "idle", good, ""), true},

		{"card id is another peer", key, rec(ownerB+".bob", "idle", good, ""), false},
		{"key is another peer", ownerB + ".bob", rec(key, "idle", good, ""), false},
		{"card id missing", key, `{"card":{"name":"n"},"status":"idle","ts":1}`, false},
		{"card missing", key, `{"status":"idle","ts":1}`, false},
		{"card id differs in case", key, rec(strings.ToUpper(key), "idle", good, ""), false},
		{"status invalid", key, rec(key, "busy", good, ""), false},
		{"status empty", key, rec(key, "", good, ""), false},
		{"status capitalised", key, rec(key, "Idle", good, ""), false},
		{"status missing", key, `{"card":{"id":"` + key + `"},"ts":1}`, false},
		{"attention invalid", key, rec(key, "idle", good, `,"attention":"sleep"`), false},
		{"attention capitalised", key, rec(key, "idle", good, `,"attention":"DND"`), false},
		{"ts missing", key, rec(key, "idle", "", ""), false},
		{"ts zero", key, rec(key, "idle", `,"ts":0`, ""), false},
		{"ts negative", key, rec(key, "idle", `,"ts":-5`, ""), false},
		{"ts string", key, rec(key, "idle", `,"ts":"1"`, ""), false},
		{"not json", key, `presence`, false},
		{"null", key, `null`, false},
		{"empty", key, ``, false},
	}
	for _, tt := range tests {
		_, err := protocol.DecodePresence(tt.key, []byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("%s: DecodePresence(%q, %s) = %v, want ok=%v", tt.name, tt.key, tt.in, err, tt.ok)
		}
	}
}

func TestPresenceLive(t *testing.T) {
	now := time.UnixMilli(presenceTS)
	window := protocol.LivenessWindow.Milliseconds()
	tests := []struct {
		status protocol.Status
		ts     int64
		want   bool
	}{
		{protocol.StatusWorking, presenceTS, true},
		{protocol.StatusIdle, presenceTS - 2000, true},
		{protocol.StatusWaiting, presenceTS - window, true}, // the window is inclusive
		{protocol.StatusWorking, presenceTS - window - 1, false},
		{protocol.StatusIdle, presenceTS - 60_000, false},
		{protocol.StatusIdle, presenceTS + 1000, true}, // a clock ahead of ours
		{protocol.StatusOffline, presenceTS, false},    // a fresh offline record is still offline
		{protocol.StatusOffline, presenceTS - 60_000, false},
	}
	for _, tt := range tests {
		p := protocol.Presence{Status: tt.status, TS: tt.ts}
		if got := p.Live(now); got != tt.want {
			t.Errorf("Presence{%s, now%+dms}.Live(now) = %v, want %v", tt.status, tt.ts-presenceTS, got, tt.want)
		}
	}
}

func TestPresenceTiming(t *testing.T) {
	if protocol.HeartbeatInterval != 2*time.Second || protocol.LivenessWindow != 6*time.Second {
		t.Errorf("heartbeat %v, window %v; the spec says 2s and 6s", protocol.HeartbeatInterval, protocol.LivenessWindow)
	}
	if protocol.ProtocolVersion != "0.4" {
		t.Errorf("ProtocolVersion = %q", protocol.ProtocolVersion)
	}
}

func TestStatusAndAttentionValid(t *testing.T) {
	for _, s := range []protocol.Status{"idle", "waiting", "working", "offline"} {
		if !s.Valid() {
			t.Errorf("Status(%q).Valid() = false", s)
		}
	}
	for _, s := range []protocol.Status{"", "busy", "IDLE", "online"} {
		if s.Valid() {
			t.Errorf("Status(%q).Valid() = true", s)
		}
	}
	for _, a := range []protocol.Attention{"", "open", "dnd", "focus"} {
		if !a.Valid() {
			t.Errorf("Attention(%q).Valid() = false", a)
		}
	}
	for _, a := range []protocol.Attention{"quiet", "muted", "Open", "closed"} {
		if a.Valid() {
			t.Errorf("Attention(%q).Valid() = true", a)
		}
	}
}

func TestAgentCardValidate(t *testing.T) {
	valid := func() protocol.AgentCard {
		return protocol.AgentCard{ID: ownerA + ".alice", Name: "alice", Kind: protocol.CardAgent}
	}
	tests := []struct {
		name string
		edit func(*protocol.AgentCard)
		ok   bool
	}{
		{"agent", func(*protocol.AgentCard) {}, true},
		{"endpoint", func(c *protocol.AgentCard) { c.Kind = protocol.CardEndpoint }, true},
		{"dev principal", func(c *protocol.AgentCard) { c.ID = "local." + nkey }, true},
		{"name at the limit", func(c *protocol.AgentCard) { c.Name = strings.Repeat("n", protocol.MaxNameLength) }, true},

		{"no id", func(c *protocol.AgentCard) { c.ID = "" }, false},
		{"nkey owner", func(c *protocol.AgentCard) { c.ID = nkey + ".team" }, false},
		{"dash-form id", func(c *protocol.AgentCard) { c.ID = ownerA + "-alice" }, false},
		{"no name", func(c *protocol.AgentCard) { c.Name = "" }, false},
		{"name with a line break", func(c *protocol.AgentCard) { c.Name = "alice\nroot (operator) waiting" }, false},
		{"name too long", func(c *protocol.AgentCard) { c.Name = strings.Repeat("n", protocol.MaxNameLength+1) }, false},
		{"no kind", func(c *protocol.AgentCard) { c.Kind = "" }, false},
		{"other kind", func(c *protocol.AgentCard) { c.Kind = "bot" }, false},
		{"capital kind", func(c *protocol.AgentCard) { c.Kind = "Agent" }, false},
	}
	for _, tt := range tests {
		c := valid()
		tt.edit(&c)
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
