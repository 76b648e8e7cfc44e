package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// streamMsgs is how many messages stream holds.
func streamMsgs(t *testing.T, ep *client.Endpoint, stream string) uint64 {
	t.Helper()
	s, err := ep.JetStream().Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// TestRetryWithTheSameIDIsStoredOnce: a caller that does not know whether its send was
// stored sends the same Draft (same id) again; the broker keeps one copy and says so.
func TestRetryWithTheSameIDIsStoredOnce(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob", Role: "worker"}, "general")
	ctx := t.Context()

	for _, send := range []struct {
		stream string
		send   func(client.Draft) (client.Sent, error)
	}{
		{"CHAT_main", func(d client.Draft) (client.Sent, error) { return alice.Post(ctx, "general", d) }},
		{"DM_main", func(d client.Draft) (client.Sent, error) { return alice.DM(ctx, bob.Principal(), d) }},
		{"TASK_main", func(d client.Draft) (client.Sent, error) { return alice.Ask(ctx, "worker", d) }},
	} {
		d := client.Text("once")
		d.ID = client.NewID()
		first, err := send.send(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := send.send(d)
		if err != nil {
			t.Fatal(err)
		}
		if first.ID != d.ID || again.ID != d.ID || first.Duplicate || !again.Duplicate || again.Seq != first.Seq {
			t.Fatalf("%s: first %+v, retry %+v: want one stored copy of id %s, the retry marked duplicate", send.stream, first, again, d.ID)
		}
		in := next(t, bob)
		if in.ID != d.ID || in.Text() != "once" {
			t.Fatalf("%s: bob got %q id %s", send.stream, in.Text(), in.ID)
		}
	}
	if n := streamMsgs(t, alice, "CHAT_main"); n != 1 {
		t.Fatalf("CHAT holds %d messages, want 1", n)
	}
	noMore(t, alice, bob, "general")
}

// TestBadMessageIDIsRefused: an id that cannot travel as a header is refused before
// anything is sent.
func TestBadMessageIDIsRefused(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	for _, id := range []string{"has space", "new\nline", strings.Repeat("x", 129)} {
		d := client.Text("x")
		d.ID = id
		if _, err := alice.Post(t.Context(), "general", d); err == nil || !strings.Contains(err.Error(), "message id") {
			t.Fatalf("id %q: %v, want a refusal naming the message id", id, err)
		}
	}
	if n := streamMsgs(t, alice, "CHAT_main"); n != 0 {
		t.Fatalf("CHAT holds %d messages after refused sends", n)
	}
}

// TestDMToNeverJoinedIsRefused: a DM to a principal that has no inbox is refused with
// ErrNoInbox and stores nothing; once it has joined (and left), a DM waits for it.
func TestDMToNeverJoinedIsRefused(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	ctx := t.Context()
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	_, err := alice.DM(ctx, bob, client.Text("lost?"))
	if !errors.Is(err, client.ErrNoInbox) || !strings.Contains(err.Error(), "never joined") {
		t.Fatalf("dm to a principal that never joined: %v, want ErrNoInbox", err)
	}
	if n := streamMsgs(t, alice, "DM_main"); n != 0 {
		t.Fatalf("DM holds %d messages after a refused DM", n)
	}
	if err := peer(t, url, client.Config{Name: "bob"}).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DM(ctx, bob, client.Text("kept")); err != nil {
		t.Fatalf("dm to bob, who joined and left: %v", err)
	}
	if in := next(t, peer(t, url, client.Config{Name: "bob"})); in.Text() != "kept" {
		t.Fatalf("bob got %q, want kept", in.Text())
	}
}
