package delivery

import (
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

func TestACLReadable(t *testing.T) {
	cases := []struct {
		name string
		acl  ACL
		ch   string
		want bool
	}{
		{"agent channel", ACL{AllowSubscribe: []string{"general"}, IssuedAllowSubscribe: []string{"general"}}, "general", true},
		{"other channel", ACL{AllowSubscribe: []string{"general"}, IssuedAllowSubscribe: []string{"general"}}, "secret", false},
		{"pattern", ACL{AllowSubscribe: []string{"team.>"}, IssuedAllowSubscribe: []string{">"}}, "team.x.y", true},
		{"every channel", ACL{AllowSubscribe: []string{">"}, IssuedAllowSubscribe: []string{">"}}, "x", true},
		{"reads nothing", ACL{AllowSubscribe: []string{}, IssuedAllowSubscribe: []string{}}, "x", false},
		{"above the issued ceiling", ACL{AllowSubscribe: []string{">"}, IssuedAllowSubscribe: []string{"general"}}, "x", false},
	}
	for _, c := range cases {
		if got := c.acl.Readable(c.ch); got != c.want {
			t.Errorf("%s: Readable(%s) = %v", c.name, c.ch, got)
		}
	}
	a := ACL{AllowSubscribe: []string{"team.>"}, IssuedAllowSubscribe: []string{"team.>"}}
	if !a.Covers("team.*") || a.Covers(">") {
		t.Error("pattern cover")
	}
}

// TestDecodeACL: the reference's row, and the row an earlier Go daemon wrote from a JWT
// (its subscribe subjects become channels); a row with neither an allowSubscribe array
// nor a subscribe list is absent, never "allow all".
func TestDecodeACL(t *testing.T) {
	a, err := decodeACL("s", []byte(`{"allowSubscribe":["general"],"revision":2,"updatedAt":5}`))
	if err != nil || !a.Readable("general") || a.Readable("x") || a.Revision != 2 {
		t.Fatalf("reference row without issuedAllowSubscribe: %+v, %v", a, err)
	}
	old := `{"principal":"local.a","lifecycleUid":"abcdefghijklmnopqrstuvwxyz","userKey":"U","subAllow":["cotal.s.chat.*.*.general","cotal.s.chat.*.*.team.>","_INBOX_x.>","$KV.cotal_presence_s.>"],"issuedAt":100,"updatedAt":7}`
	a, err = decodeACL("s", []byte(old))
	if err != nil || !a.Readable("general") || !a.Readable("team.x") || a.Readable("random") || a.IssuedAt != 100 {
		t.Fatalf("earlier Go row: %+v, %v", a, err)
	}
	a, err = decodeACL("s", []byte(`{"principal":"local.a","lifecycleUid":"abcdefghijklmnopqrstuvwxyz","subAllow":["cotal.s.chat.>"]}`))
	if err != nil || !a.Readable("anything") {
		t.Fatalf("earlier Go observer row: %+v, %v", a, err)
	}
	for _, bad := range []string{`{"principal":"local.a","lifecycleUid":"abcdefghijklmnopqrstuvwxyz","userKey":"U"}`, `{}`, `{"allowSubscribe":"general"}`, `nope`} {
		if a, err := decodeACL("s", []byte(bad)); err == nil {
			t.Errorf("%s read as %+v", bad, a)
		}
	}
}

func TestMembershipWindow(t *testing.T) {
	active := protocol.Membership{State: protocol.MembershipActive, JoinCursor: 10}
	at := uint64(20)
	left := protocol.Membership{State: protocol.MembershipLeft, JoinCursor: 10, LeaveCursor: &at}
	for _, c := range []struct {
		m    protocol.Membership
		seq  uint64
		want bool
	}{{active, 10, false}, {active, 11, true}, {active, 1 << 40, true}, {left, 11, true}, {left, 20, true}, {left, 21, false}} {
		if got := c.m.Covers(c.seq); got != c.want {
			t.Errorf("%+v covers %d = %v", c.m, c.seq, got)
		}
	}
	if k := protocol.MembershipKey("team.*.>", protocol.Principal{Owner: "local", Actor: "a"}, "u"); k != "team.=.==/local.a.u" {
		t.Errorf("key %q", k)
	}
}

// TestNarrowedCredentialStopsCopies: the ACL is read per copy, so a member that presents a
// newer credential without the channel stops getting its copies, though its membership
// row stays.
func TestNarrowedCredentialStopsCopies(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	bob := m.endpoint(m.agent("bob", "general", "random"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	dave := m.endpoint(m.agent("dave", "general"))
	if err := dave.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	if _, err := alice.Post(t.Context(), "general", client.Text("before")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's copy", deadline, func() bool { return m.stored("bob") == 1 })

	narrow := m.endpoint(m.agent("bob", "random")) // same principal and uid, read ACL without general
	if err := narrow.JoinChannel(t.Context(), "random"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Post(t.Context(), "general", client.Text("after")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "dave's copies", deadline, func() bool { return m.stored("dave") == 2 })
	if n := m.stored("bob"); n != 1 {
		t.Fatalf("bob has %d copies after his read ACL lost general, want 1", n)
	}
}
