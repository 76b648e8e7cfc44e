package meshview_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// TestNeedsYouHoldsEveryWaitingPeer: a person's session (card kind endpoint) waiting for
// a person is in NEEDS YOU like an agent, an offline or idle peer is not, and an empty
// lane is [] (not null) on the wire.
func TestNeedsYouHoldsEveryWaitingPeer(t *testing.T) {
	epoch := meshtestClock(t)()
	m := meshview.New(meshview.Config{Now: func() time.Time { return epoch }})
	if b, _ := json.Marshal(m.NeedsYou()); string(b) != "[]" {
		t.Fatalf("empty needs-you is %s, want []", b)
	}
	add := func(name, kind string, st protocol.Status, online bool) {
		m.ApplyPeer(client.Peer{Online: online, Presence: protocol.Presence{
			Card:   protocol.AgentCard{ID: "local." + name, Name: name, Kind: kind},
			Status: st, TS: epoch.UnixMilli(), StatusSince: epoch.Add(-time.Minute).UnixMilli()}})
	}
	add("helper", protocol.CardAgent, protocol.StatusWaiting, true)
	add("desk", protocol.CardEndpoint, protocol.StatusWaiting, true)
	add("gone", protocol.CardAgent, protocol.StatusWaiting, false)
	add("busy", protocol.CardAgent, protocol.StatusWorking, true)
	ny := m.NeedsYou()
	if len(ny) != 2 || ny[0].Name != "helper" || ny[1].Name != "desk" { // equal waits: agents first
		t.Fatalf("needs you %+v, want helper and desk", ny)
	}
	if c := m.Counts(); c.Waiting != 2 || c.Working != 1 || c.Offline != 1 {
		t.Fatalf("counts %+v, want 2 waiting (every kind), 1 working, 1 offline", c)
	}
}

// TestRecentMixesKindsByTime: the all-activity backfill holds channel posts and DMs
// together, ordered by their time (history lands stream by stream), and keeps the newest.
func TestRecentMixesKindsByTime(t *testing.T) {
	m := meshview.New(meshview.Config{FeedDepth: 3})
	alice := protocol.Principal{Owner: "local", Actor: "alice"}
	bob := protocol.Principal{Owner: "local", Actor: "bob"}
	apply := func(id string, ts int64, dm bool) {
		r := protocol.Received{Kind: protocol.DeliveryChannel,
			Subject: protocol.Subject{Kind: protocol.KindChat, Sender: alice, Channel: "team"},
			Message: protocol.Message{ID: id, TS: ts, From: protocol.EndpointRef{ID: alice.String(), Name: "alice"},
				Parts: []protocol.Part{protocol.TextPart(id)}}}
		if dm {
			r.Kind, r.Subject = protocol.DeliveryDM, protocol.Subject{Kind: protocol.KindInst, Sender: alice, Recipient: bob}
		}
		m.ApplyMessage(r)
	}
	apply("c1", 10, false)
	apply("c2", 30, false)
	apply("c3", 50, false)
	apply("d1", 20, true) // read after the channel history, older than c2
	apply("d2", 40, true)
	var got []string
	for _, msg := range m.Recent(0) {
		got = append(got, msg.ID)
	}
	// The newest three applied are c3, d1, d2: by time d1, d2, c3.
	if len(got) != 3 || got[0] != "d1" || got[1] != "d2" || got[2] != "c3" {
		t.Fatalf("recent %v, want [d1 d2 c3]", got)
	}
	if r := m.Recent(1); len(r) != 1 || r[0].ID != "c3" {
		t.Fatalf("recent(1) %+v, want c3", r)
	}
}
