package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

type subjectCase struct {
	name string
	in   string
	ok   bool
	want protocol.Subject // compared only when ok
}

// subjectCases holds the SPEC vectors of wire-protocol.md §3.5 first, then the shapes
// ParseSubject must refuse. ParseSubject does not check owners; Receive does.
var subjectCases = []subjectCase{
	// SPEC §3.5.
	{"spec chat hierarchical channel", "cotal.main.chat." + ownerA + ".alice.team.backend", true,
		protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: alice, Channel: "team.backend"}},
	{"spec inst", "cotal.main.inst." + ownerB + ".bob." + ownerA + ".alice", true,
		protocol.Subject{Space: "main", Kind: protocol.KindInst, Sender: alice, Recipient: bob}},
	{"spec svc", "cotal.main.svc.reviewer." + ownerA + ".alice", true,
		protocol.Subject{Space: "main", Kind: protocol.KindSvc, Sender: alice, Role: "reviewer"}},
	{"spec ctl is a retired rail", "cotal.main.ctl.manager." + ownerA + ".alice", false, protocol.Subject{}},
	{"spec chat without channel", "cotal.main.chat." + ownerA + ".alice", false, protocol.Subject{}},
	{"spec chat with nkey owner parses", "cotal.main.chat." + nkey + ".team.backend", true,
		protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: protocol.Principal{Owner: nkey, Actor: "team"}, Channel: "backend"}},

	// More good shapes.
	{"chat one-token channel", "cotal.main.chat.local.alice.general", true,
		protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: protocol.Principal{Owner: "local", Actor: "alice"}, Channel: "general"}},
	{"chat deep channel", "cotal.main.chat." + ownerA + ".alice.a.b.c.d", true,
		protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: alice, Channel: "a.b.c.d"}},
	{"dashes in space and channel", "cotal.my-space.chat.local.alice.team-a", true,
		protocol.Subject{Space: "my-space", Kind: protocol.KindChat, Sender: protocol.Principal{Owner: "local", Actor: "alice"}, Channel: "team-a"}},
	{"identity is not checked here", "cotal.main.chat.Not_An_Owner.a-b.c", true,
		protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: protocol.Principal{Owner: "Not_An_Owner", Actor: "a-b"}, Channel: "c"}},
	{"live manager", "cotal.main.live.manager." + ownerA + ".alice", true,
		protocol.Subject{Space: "main", Kind: protocol.KindLive, Sender: alice, Plane: protocol.PlaneManager}},
	{"live delivery", "cotal.main.live.delivery.local.alice", true,
		protocol.Subject{Space: "main", Kind: protocol.KindLive, Sender: protocol.Principal{Owner: "local", Actor: "alice"}, Plane: protocol.PlaneDelivery}},

	// Live rail.
	{"live unknown plane", "cotal.main.live.auth." + ownerA + ".alice", false, protocol.Subject{}},
	{"live reply subject", "cotal.main.live.manager." + ownerA + ".alice.reply.n1", false, protocol.Subject{}},
	{"live too short", "cotal.main.live.manager." + ownerA, false, protocol.Subject{}},

	// Wrong arity.
	{"inst 6 tokens", "cotal.main.inst." + ownerB + ".bob." + ownerA, false, protocol.Subject{}},
	{"inst 8 tokens", "cotal.main.inst." + ownerB + ".bob." + ownerA + ".alice.x", false, protocol.Subject{}},
	{"svc 5 tokens", "cotal.main.svc.reviewer." + ownerA, false, protocol.Subject{}},
	{"svc 7 tokens", "cotal.main.svc.reviewer." + ownerA + ".alice.x", false, protocol.Subject{}},
	{"chat 4 tokens", "cotal.main.chat." + ownerA, false, protocol.Subject{}},
	{"root only", "cotal", false, protocol.Subject{}},
	{"root and space", "cotal.main", false, protocol.Subject{}},
	{"kind only", "cotal.main.chat", false, protocol.Subject{}},

	// Wildcards are subscription patterns, never delivered subjects.
	{"chat filter", "cotal.main.chat.*.*.team", false, protocol.Subject{}},
	{"chat tap", "cotal.main.chat.>", false, protocol.Subject{}},
	{"channel >", "cotal.main.chat." + ownerA + ".alice.team.>", false, protocol.Subject{}},
	{"channel *", "cotal.main.chat." + ownerA + ".alice.*", false, protocol.Subject{}},
	{"dm filter", "cotal.main.inst." + ownerB + ".bob.>", false, protocol.Subject{}},
	{"space *", "cotal.*.chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"role *", "cotal.main.svc.*." + ownerA + ".alice", false, protocol.Subject{}},
	{"kind *", "cotal.main.*." + ownerA + ".alice.c", false, protocol.Subject{}},

	// Empty tokens.
	{"empty", "", false, protocol.Subject{}},
	{"empty space", "cotal..chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"empty actor", "cotal.main.chat." + ownerA + "..c", false, protocol.Subject{}},
	{"empty channel segment", "cotal.main.chat." + ownerA + ".alice.team..c", false, protocol.Subject{}},
	{"trailing dot", "cotal.main.chat." + ownerA + ".alice.c.", false, protocol.Subject{}},
	{"leading dot", ".cotal.main.chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"empty inst token", "cotal.main.inst." + ownerB + "..." + ownerA + ".alice", false, protocol.Subject{}},

	// Wrong root or kind.
	{"capital root", "Cotal.main.chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"longer root", "cotalx.main.chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"no root", "main.chat." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"kv subject", "$KV.cotal_presence_main." + ownerA + ".alice", false, protocol.Subject{}},
	{"inbox", "_INBOX_abcdefgh.x", false, protocol.Subject{}},
	{"capital kind", "cotal.main.CHAT." + ownerA + ".alice.c", false, protocol.Subject{}},
	{"trace", "cotal.main.trace.inst1", false, protocol.Subject{}},
	{"dinbox", "cotal.main.dinbox." + ownerA + ".alice." + strings.Repeat("0", 26), false, protocol.Subject{}},
	{"dlv", "cotal.main.dlv." + ownerA + ".alice." + strings.Repeat("0", 26), false, protocol.Subject{}},
	{"ep", "cotal.main.ep.one.auth.login", false, protocol.Subject{}},

	// Tokens that are not concrete tokens.
	{"space in channel", "cotal.main.chat." + ownerA + ".alice.my channel", false, protocol.Subject{}},
	{"unicode channel", "cotal.main.chat." + ownerA + ".alice.équipe", false, protocol.Subject{}},
	{"newline", "cotal.main.chat." + ownerA + ".alice.c\n", false, protocol.Subject{}},
	{"tab", "cotal.main.chat." + ownerA + ".alice.\tc", false, protocol.Subject{}},
	{"slash", "cotal.main.chat." + ownerA + ".alice.foo/bar", false, protocol.Subject{}},
	{"invalid utf-8", "cotal.main.chat." + ownerA + ".alice.\xff", false, protocol.Subject{}},
}

func TestParseSubject(t *testing.T) {
	for _, tt := range subjectCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.ParseSubject(tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("ParseSubject(%q) = %+v, want an error", tt.in, got)
				}
				if !errors.Is(err, protocol.ErrMalformedSubject) {
					t.Errorf("ParseSubject(%q) error %v does not wrap ErrMalformedSubject", tt.in, err)
				}
				if got != (protocol.Subject{}) {
					t.Errorf("ParseSubject(%q) failed but returned %+v", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSubject(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSubject(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("ParseSubject(%q).String() = %q, want its input", tt.in, s)
			}
		})
	}
}

func TestSubjectBuilders(t *testing.T) {
	tests := []struct {
		name  string
		built string
		want  string
		sub   protocol.Subject // what the built subject parses to
	}{
		{"chat", protocol.ChatSubject("main", alice, "team.backend"),
			"cotal.main.chat." + ownerA + ".alice.team.backend",
			protocol.Subject{Space: "main", Kind: protocol.KindChat, Sender: alice, Channel: "team.backend"}},
		{"inst", protocol.InstSubject("main", bob, alice),
			"cotal.main.inst." + ownerB + ".bob." + ownerA + ".alice",
			protocol.Subject{Space: "main", Kind: protocol.KindInst, Sender: alice, Recipient: bob}},
		{"svc", protocol.SvcSubject("main", "reviewer", alice),
			"cotal.main.svc.reviewer." + ownerA + ".alice",
			protocol.Subject{Space: "main", Kind: protocol.KindSvc, Sender: alice, Role: "reviewer"}},
		{"live", protocol.LiveSubject("main", protocol.PlaneDelivery, alice),
			"cotal.main.live.delivery." + ownerA + ".alice",
			protocol.Subject{Space: "main", Kind: protocol.KindLive, Sender: alice, Plane: protocol.PlaneDelivery}},
	}
	for _, tt := range tests {
		if tt.built != tt.want {
			t.Errorf("%s builder = %q, want %q", tt.name, tt.built, tt.want)
		}
		got, err := protocol.ParseSubject(tt.built)
		if err != nil {
			t.Errorf("%s: ParseSubject(%q): %v", tt.name, tt.built, err)
			continue
		}
		if got != tt.sub {
			t.Errorf("%s: ParseSubject(%q) = %+v, want %+v", tt.name, tt.built, got, tt.sub)
		}
		if got.String() != tt.built {
			t.Errorf("%s: %+v.String() = %q, want %q", tt.name, got, got.String(), tt.built)
		}
	}
	if s := (protocol.Subject{Kind: "ctl", Space: "main"}).String(); s != "" {
		t.Errorf("String() of an unknown kind = %q, want empty", s)
	}
}

func TestSubjectFilters(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{protocol.ChannelFilter("main", "team.backend"), "cotal.main.chat.*.*.team.backend"},
		{protocol.ChannelFilter("main", "team.>"), "cotal.main.chat.*.*.team.>"},
		{protocol.ChannelFilter("main", "*"), "cotal.main.chat.*.*.*"},
		{protocol.ChatAll("main"), "cotal.main.chat.>"},
		{protocol.DMFilter("main", bob), "cotal.main.inst." + ownerB + ".bob.>"},
		{protocol.InstAll("main"), "cotal.main.inst.>"},
		{protocol.RoleFilter("main", "reviewer"), "cotal.main.svc.reviewer.>"},
		{protocol.SvcAll("main"), "cotal.main.svc.>"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("filter = %q, want %q", tt.got, tt.want)
		}
	}
}

// TestFiltersSelect checks each filter against built subjects with NATS matching rules
// (ChannelMatches implements them for any dotted string).
func TestFiltersSelect(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{protocol.ChannelFilter("main", "team.backend"), protocol.ChatSubject("main", alice, "team.backend"), true},
		{protocol.ChannelFilter("main", "team.backend"), protocol.ChatSubject("main", bob, "team.backend"), true},
		{protocol.ChannelFilter("main", "team.backend"), protocol.ChatSubject("main", alice, "team.backend.db"), false},
		{protocol.ChannelFilter("main", "team.>"), protocol.ChatSubject("main", alice, "team.backend"), true},
		{protocol.ChannelFilter("main", "team.>"), protocol.ChatSubject("main", alice, "team"), false},
		{protocol.ChannelFilter("main", "team.*"), protocol.ChatSubject("main", alice, "team.a.b"), false},
		{protocol.ChannelFilter("main", "team"), protocol.ChatSubject("other", alice, "team"), false},
		{protocol.ChatAll("main"), protocol.ChatSubject("main", alice, "x"), true},
		{protocol.ChatAll("main"), protocol.InstSubject("main", bob, alice), false},
		{protocol.DMFilter("main", bob), protocol.InstSubject("main", bob, alice), true},
		{protocol.DMFilter("main", bob), protocol.InstSubject("main", alice, bob), false},
		{protocol.InstAll("main"), protocol.InstSubject("main", alice, bob), true},
		{protocol.RoleFilter("main", "reviewer"), protocol.SvcSubject("main", "reviewer", alice), true},
		{protocol.RoleFilter("main", "reviewer"), protocol.SvcSubject("main", "planner", alice), false},
		{protocol.SvcAll("main"), protocol.SvcSubject("main", "planner", alice), true},
		{protocol.SvcAll("main"), protocol.ChatSubject("main", alice, "svc"), false},
	}
	for _, tt := range tests {
		if got := protocol.ChannelMatches(tt.filter, tt.subject); got != tt.want {
			t.Errorf("filter %q on %q = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
	}
}

func FuzzParseSubject(f *testing.F) {
	for _, c := range subjectCases {
		f.Add(c.in)
	}
	f.Add(protocol.InstSubject("main", bob, alice))
	f.Add(protocol.LiveSubject("main", protocol.PlaneManager, alice))
	f.Fuzz(func(t *testing.T, s string) {
		sub, err := protocol.ParseSubject(s)
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformedSubject) {
				t.Fatalf("ParseSubject(%q) error %v does not wrap ErrMalformedSubject", s, err)
			}
			return
		}
		if got := sub.String(); got != s {
			t.Fatalf("%q parsed to %+v, which builds %q", s, sub, got)
		}
		for _, tok := range []string{sub.Space, sub.Sender.Owner, sub.Sender.Actor} {
			if !protocol.ValidToken(tok) {
				t.Fatalf("%q parsed to %+v with a non-token %q", s, sub, tok)
			}
		}
		if again, err := protocol.ParseSubject(sub.String()); err != nil || again != sub {
			t.Fatalf("%q: reparse gave %+v, %v; want %+v", s, again, err, sub)
		}
	})
}
