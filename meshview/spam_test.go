package meshview_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// spamPresence writes n presence records of local.<actor> straight on its key's subject,
// as fast as the connection takes them (an agent writing its own key in a loop), each
// with activity act(i), and waits until the broker has them all.
func spamPresence(t testing.TB, url, actor string, n int, act func(int) string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	id := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}.String()
	subject := "$KV." + protocol.BucketPresence(space) + "." + id
	for i := range n {
		rec := protocol.Presence{Card: protocol.AgentCard{ID: id, Name: actor, Kind: protocol.CardAgent},
			Status: protocol.StatusWorking, TS: time.Now().UnixMilli(), Activity: act(i)}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestPresenceSpamIsCoalesced: 2000 writes of one agent's own key reach the model as a
// handful of roster events (at most one per interval), and the state it settles on is
// the agent's last write.
func TestPresenceSpamIsCoalesced(t *testing.T) {
	url := openMesh(t)
	m, _ := watch(t, url, time.Now)
	const n = 2000
	before := m.Seq()
	start := time.Now()
	spamPresence(t, url, "spammer", n, func(i int) string { return "write " + strconv.Itoa(i) })
	// The SDK's presence watch may drop records while the spam lasts (a full queue), so
	// the final state is written until the model shows it.
	meshtest.Until(t, "the final write in the model", 20*time.Second, func() bool {
		if a, ok := agent(m, "spammer"); ok && a.Activity == "final" {
			return true
		}
		spamPresence(t, url, "spammer", 1, func(int) string { return "final" })
		return false
	})
	roster := int(m.Seq() - before) // nothing but the spammer changes here
	limit := int(time.Since(start)/meshview.DefaultPresenceEvery) + 2
	t.Logf("%d writes: %d roster events in %s (limit %d)", n, roster, time.Since(start).Round(time.Millisecond), limit)
	if roster > limit || roster > n/10 {
		t.Fatalf("%d writes made %d roster events, want at most %d: presence is not coalesced", n, roster, min(limit, n/10))
	}
}
