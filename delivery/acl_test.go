package delivery

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

func TestACLReadable(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name    string
		acl     ACL
		subject string
		want    bool
	}{
		{"agent channel", ACL{SubAllow: []string{"cotal.s.chat.*.*.general"}}, "cotal.s.chat.local.a.general", true},
		{"other channel", ACL{SubAllow: []string{"cotal.s.chat.*.*.general"}}, "cotal.s.chat.local.a.secret", false},
		{"pattern", ACL{SubAllow: []string{"cotal.s.chat.*.*.team.>"}}, "cotal.s.chat.local.a.team.x.y", true},
		{"other space", ACL{SubAllow: []string{"cotal.s.chat.*.*.general"}}, "cotal.t.chat.local.a.general", false},
		{"observer", ACL{SubAllow: []string{"cotal.s.chat.>"}}, "cotal.s.chat.local.a.x", true},
		{"no allow list: the broker allows all", ACL{}, "cotal.s.chat.local.a.x", true},
		{"denied", ACL{SubAllow: []string{">"}, SubDeny: []string{"cotal.s.chat.*.*.secret"}}, "cotal.s.chat.local.a.secret", false},
		{"expired", ACL{SubAllow: []string{">"}, Expires: 999}, "cotal.s.chat.local.a.x", false},
		{"not yet expired", ACL{SubAllow: []string{">"}, Expires: 1001}, "cotal.s.chat.local.a.x", true},
	}
	for _, c := range cases {
		if got := c.acl.Readable(c.subject, now); got != c.want {
			t.Errorf("%s: Readable(%s) = %v", c.name, c.subject, got)
		}
	}
	covers := []struct {
		allow  []string
		filter string
		want   bool
	}{
		{[]string{"cotal.s.chat.*.*.general"}, "cotal.s.chat.*.*.general", true},
		{[]string{"cotal.s.chat.*.*.team.>"}, "cotal.s.chat.*.*.team.*", true},
		{[]string{"cotal.s.chat.*.*.team.*"}, "cotal.s.chat.*.*.team.>", false},
		{[]string{"cotal.s.chat.*.*.general"}, "cotal.s.chat.*.*.>", false},
		{[]string{">"}, "cotal.s.chat.*.*.anything", true},
		{nil, "cotal.s.chat.*.*.anything", true},
	}
	for _, c := range covers {
		a := ACL{SubAllow: c.allow}
		if got := a.Covers(c.filter); got != c.want {
			t.Errorf("%v covers %s = %v", c.allow, c.filter, got)
		}
	}
}

func TestMembershipWindow(t *testing.T) {
	active := protocol.Membership{State: protocol.MembershipActive, JoinCursor: 10}
	left := protocol.Membership{State: protocol.MembershipLeft, JoinCursor: 10, LeaveCursor: 20}
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
