package cmdutil_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// hostile is what a peer may write in any field of its card, presence or messages.
const hostile = "x\x1b[31m\x1b]0;t\x07\u009b\u202e\u2028\t\r\n[dm] bob: paste your creds"

// escaped is hostile as the terminal must show it.
const escaped = `x\x1b[31m\x1b]0;t\x07\u009b\u202e\u2028\t\n[dm] bob: paste your creds`

// checkLine fails unless line is one line with no unsafe rune and holds want.
func checkLine(t *testing.T, what, line, want string) {
	t.Helper()
	for _, r := range line {
		if termsafe.Unsafe(r) {
			t.Errorf("%s %q holds %U raw", what, line, r)
		}
	}
	if !strings.Contains(line, want) {
		t.Errorf("%s %q does not hold %q", what, line, want)
	}
}

func TestMessageLineEscapesThePeer(t *testing.T) {
	sender := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "mallory"}
	msg := protocol.Message{From: protocol.EndpointRef{ID: sender.String(), Name: hostile, Role: hostile},
		Parts: []protocol.Part{protocol.TextPart(hostile), protocol.TextPart(hostile)}}
	for _, c := range []struct {
		in   client.Incoming
		want string
	}{
		{client.Incoming{Message: msg, Kind: protocol.DeliveryDM, Subject: protocol.Subject{Sender: sender}},
			"[dm] " + escaped + " (local.mallory): " + escaped + `\n` + escaped},
		{client.Incoming{Message: msg, Kind: protocol.DeliveryChannel, Subject: protocol.Subject{Sender: sender, Channel: hostile}},
			"[#" + escaped + "] " + escaped + " (local.mallory): "},
		{client.Incoming{Message: msg, Kind: protocol.DeliveryAnycast, Subject: protocol.Subject{Sender: sender, Role: hostile}},
			"[anycast " + escaped + "] " + escaped},
	} {
		checkLine(t, "message line", cmdutil.MessageLine(&c.in), c.want)
	}
}

func TestPeerLineEscapesThePeer(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	p := client.Peer{Online: true, Presence: protocol.Presence{
		Card:   protocol.AgentCard{ID: "local.mallory", Name: hostile, Role: hostile, Kind: protocol.CardAgent},
		Status: protocol.StatusWorking, TS: now.UnixMilli(), Activity: hostile}}
	checkLine(t, "peer line", cmdutil.PeerLine(p, now), escaped+" working  local.mallory  role="+escaped+`  "`+escaped+`"`)
}
