package trust

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/protocol"
)

// TestAgentRunsTheClient runs the real SDK under agent credentials: it must get by on
// exactly what the agent profile grants, with no refusal from the broker at any step.
func TestAgentRunsTheClient(t *testing.T) {
	sp := oneSpace(t)
	sp.precreateDM(t, alice, uidA)
	sp.precreateDM(t, bob, uidB)
	sp.precreateRole(t, "reviewer")
	general := []string{"general"}

	connect := func(spec UserSpec) (*client.Endpoint, *conn) {
		t.Helper()
		path, inbox := sp.mint(t, spec)
		c := &conn{inbox: inbox, errs: make(chan error, 1024)}
		ep, err := client.Connect(t.Context(), sp.url,
			client.Config{Space: sp.name, Name: spec.Principal.Actor, Role: spec.Role, LifecycleUID: spec.LifecycleUID, Heartbeat: time.Hour},
			c.options(path, inbox)...)
		if err != nil {
			t.Fatal(err)
		}
		c.nc = ep.Conn()
		return ep, c
	}
	console := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "console"}
	o, oConn := connect(UserSpec{Name: "console", Profile: ProfileObserver, Principal: console, LifecycleUID: uidC})
	defer func() {
		if err := o.Close(); err != nil {
			t.Errorf("close observer: %v", err)
		}
	}()
	if err := o.Listen(t.Context(), ">"); err != nil { // the console's tap
		t.Fatal(err)
	}
	a, aConn := connect(agentSpec(alice, uidA, general, general))
	bs := agentSpec(bob, uidB, general, general)
	bs.Role = "reviewer"
	b, bConn := connect(bs)
	defer func() {
		for _, ep := range []*client.Endpoint{a, b} {
			if err := ep.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	}()

	// Both join before anything is posted, so Join replays no history (see the report on
	// the history reader's name).
	if err := a.Join(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := b.Join(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}

	if _, err := a.Post(t.Context(), "general", client.Text("hello")); err != nil {
		t.Fatal(err)
	}
	in := clienttest.Receive(t, b, deadline)
	if in.Kind != protocol.DeliveryChannel || in.From.ID != alice.String() {
		t.Fatalf("bob got %+v, want alice's post", in)
	}
	if in := clienttest.Receive(t, o, deadline); in.Kind != protocol.DeliveryChannel || in.From.ID != alice.String() {
		t.Fatalf("the observer got %+v, want alice's post", in)
	}

	if _, err := a.DM(t.Context(), bob, client.Text("psst")); err != nil {
		t.Fatal(err)
	}
	in = clienttest.Receive(t, b, deadline)
	if in.Kind != protocol.DeliveryDM || !in.Durable || in.From.ID != alice.String() {
		t.Fatalf("bob got %+v, want alice's DM from his durable", in)
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}

	if _, err := a.Ask(t.Context(), "reviewer", client.Text("review this")); err != nil {
		t.Fatal(err)
	}
	in = clienttest.Receive(t, b, deadline)
	if in.Kind != protocol.DeliveryAnycast || !in.Durable {
		t.Fatalf("bob got %+v, want the anycast from the role durable", in)
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}

	peers, err := a.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range peers {
		if p.Online {
			ids = append(ids, p.Card.ID)
		}
	}
	if len(ids) != 2 || ids[0] != alice.String() || ids[1] != bob.String() {
		t.Fatalf("roster online %v, want alice and bob", ids)
	}
	if _, err := a.ChannelStats(t.Context()); err != nil {
		t.Fatal(err)
	}

	if peers, err := o.Roster(t.Context()); err != nil || len(peers) != 2 {
		t.Fatalf("observer roster: %d peers, %v; want alice and bob", len(peers), err)
	}
	if _, err := o.ChannelStats(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-o.Messages():
		t.Fatalf("the observer saw %s %q: it must see no DM or anycast", in.Kind, in.Subject)
	default:
	}

	for _, c := range []*conn{aConn, bConn, oConn} {
		c.noErrors(t)
	}
	for _, c := range []*conn{aConn, bConn, oConn} {
		if c.nc.Opts.InboxPrefix != c.inbox {
			t.Fatalf("connection inbox prefix %q, want %q", c.nc.Opts.InboxPrefix, c.inbox)
		}
	}
}
