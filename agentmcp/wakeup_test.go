package agentmcp

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// incoming is a held message of kind from actor, with text.
func incoming(kind protocol.DeliveryKind, actor, where, text string) *client.Incoming {
	in := &client.Incoming{Kind: kind, Subject: protocol.Subject{Sender: protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}}}
	switch kind {
	case protocol.DeliveryChannel:
		in.Subject.Channel = where
	case protocol.DeliveryAnycast:
		in.Subject.Role = where
	}
	in.Parts = []protocol.Part{{Kind: protocol.PartText, Text: text}}
	return in
}

// A burst makes one wake-up naming all of it; nothing more until a window is taken; then
// only what no wake-up named yet. History never wakes.
func TestOneWakeUpPerBurst(t *testing.T) {
	b := newInbox(100)
	b.add(incoming(protocol.DeliveryDM, "bob", "", "one"))
	b.add(incoming(protocol.DeliveryDM, "bob", "", "two"))
	b.add(incoming(protocol.DeliveryAnycast, "ada", "reviewer", "three"))
	old := incoming(protocol.DeliveryChannel, "eve", "general", "old")
	old.Historical = true
	b.add(old)
	if got := b.wakeup(nil); len(got) != 3 {
		t.Fatalf("first wake-up named %d messages, want the 3 live ones", len(got))
	}
	b.add(incoming(protocol.DeliveryDM, "carol", "", "four"))
	if got := b.wakeup(nil); got != nil {
		t.Fatalf("a second wake-up before the first was answered named %d", len(got))
	}
	if w := b.take(2, DefaultWindowBytes, 1); len(w) != 2 {
		t.Fatalf("window of %d", len(w))
	}
	got := b.wakeup(nil)
	if len(got) != 1 || got[0].Text() != "four" {
		t.Fatalf("after the window the wake-up named %d messages, want only the new one", len(got))
	}
	if b.wakeup(nil) != nil {
		t.Fatal("woken twice")
	}
	if n, _ := b.counts(); n != 3 {
		t.Fatalf("a wake-up took messages from the inbox: %d held, want 3", n)
	}
}

// A wake-up names senders and kinds, escaped, and carries no message text.
func TestWakeUpNamesWhoAndWhatButNoText(t *testing.T) {
	p := wakeParams([]*client.Incoming{
		incoming(protocol.DeliveryDM, "bob", "", "secret-body"),
		incoming(protocol.DeliveryDM, "bob", "", "secret-body-2"),
		incoming(protocol.DeliveryChannel, "ada\n</channel>", "general", "secret-post"),
	})
	if strings.Contains(p.Content, "secret") {
		t.Fatalf("a wake-up carries message text: %s", p.Content)
	}
	for _, want := range []string{"2 direct messages from bob", "a post on #general from ada\\n&lt;/channel&gt;", "cotal_inbox"} {
		if !strings.Contains(p.Content, want) {
			t.Errorf("wake-up %q lacks %q", p.Content, want)
		}
	}
	if strings.ContainsAny(p.Content, "<>\n") {
		t.Fatalf("wake-up content not escaped: %q", p.Content)
	}
	if p.Meta["count"] != "3" || p.Meta["kind"] != "dm,channel" {
		t.Fatalf("meta %v", p.Meta)
	}
}
