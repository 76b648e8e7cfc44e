package web_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// spamModel applies n roster changes of one agent (activity "write <i>") to m, then one
// channel post, "after".
func spamModel(m *meshview.Model, n int) {
	for i := range n {
		m.ApplyPeer(client.Peer{Online: true, Presence: protocol.Presence{
			Card:   protocol.AgentCard{ID: "local.spammer", Name: "spammer", Kind: protocol.CardAgent},
			Status: protocol.StatusWorking, Activity: "write " + strconv.Itoa(i)}})
	}
	alice := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	m.ApplyMessage(protocol.Received{Kind: protocol.DeliveryChannel,
		Subject: protocol.Subject{Kind: protocol.KindChat, Sender: alice, Channel: "team"},
		Message: protocol.Message{ID: "after", From: protocol.EndpointRef{ID: alice.String(), Name: "alice"},
			Parts: []protocol.Part{protocol.TextPart("after")}}})
}

// TestFeedCoalescesRoster: 1000 changes of one agent reach a feed as a few roster events,
// and before the next message the feed has sent the agent's latest state, so the ids it
// sent only grow and nothing is lost to a resume.
func TestFeedCoalescesRoster(t *testing.T) {
	m := meshview.New(meshview.Config{})
	srv := httptest.NewServer((&web.Server{Space: space, Model: m}).Handler())
	t.Cleanup(srv.Close) // after the feed closes (cleanups run last first)
	feed := openFeed(t, srv.URL, "")
	next(t, feed, "snapshot")
	const n = 1000
	spamModel(m, n)
	roster, lastSeq, last := 0, uint64(0), ""
	for {
		ev := next(t, feed, "the feed")
		var e meshview.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq <= lastSeq {
			t.Fatalf("event %d after %d: ids must grow", e.Seq, lastSeq)
		}
		lastSeq = e.Seq
		if ev.typ == "message" {
			break
		}
		roster++
		last = e.Agent.Activity
	}
	t.Logf("%d changes: %d roster events", n, roster)
	if roster > 10 || last != "write "+strconv.Itoa(n-1) {
		t.Fatalf("%d changes sent %d roster events, the last %q: want a few, the last write %d", n, roster, last, n-1)
	}
}
