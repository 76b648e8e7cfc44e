package interop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// TestInboxEntryShape: Go reads the reference's mixed inbox entry (endpoint.ts
// publishDinbox's Plane3Entry) field for field, encodes it back to the same JSON, and reads
// the member incarnation from the entry's six-token subject only.
func TestInboxEntryShape(t *testing.T) {
	ref := fixture(t, "inbox-entry.json")
	var e protocol.InboxEntry
	if err := json.Unmarshal(ref, &e); err != nil {
		t.Fatal(err)
	}
	if e.Channel != "general" || e.Seq != 7 || e.Reason != protocol.HandoffDurableChannel || e.Generation != 1 {
		t.Fatalf("entry %+v", e)
	}
	got, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "inbox entry", got, ref)

	uid := protocol.NewLifecycleUID()
	p, u, err := protocol.ParseDinbox(space, "cotal.team.dinbox.local.bob."+uid)
	if err != nil || p != (protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}) || u != uid {
		t.Fatalf("parse: %v %v %v", p, u, err)
	}
	if got := protocol.DinboxSubject(space, p, uid); got != "cotal.team.dinbox.local.bob."+uid {
		t.Fatalf("subject %s", got)
	}
	for _, bad := range []string{"cotal.team.dinbox.local.bob", "cotal.team.dinbox.local.bob." + uid + ".x", "cotal.other.dinbox.local.bob." + uid,
		"cotal.team.dinbox.local.bob.SHORT"} {
		if _, _, err := protocol.ParseDinbox(space, bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// refDaemon is a reference-style delivery daemon speaking raw nats.go with the delivery
// credential: it answers ctl.delivery as the reference's handleDeliveryControl does (and
// creates no hand-off durable: the reference's provisioner made it at mint), and writes
// its hand-off copies to DLV as its readerHandle does.
type refDaemon struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newRefDaemon(t *testing.T, m *meshtest.Mesh) *refDaemon {
	nc := (&dlvMesh{Mesh: m, t: t}).foreign(m.Mint(space, meshtest.DeliverySpec()))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	d := &refDaemon{t: t, nc: nc, js: js}
	sub, err := nc.QueueSubscribe("cotal."+space+".ctl.delivery.*.*", "delivery", d.answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d
}

// answer serves the three ops of the reference's rail a Go member sends.
func (d *refDaemon) answer(m *nats.Msg) {
	var req struct {
		Op   string          `json:"op"`
		Args json.RawMessage `json:"args"`
	}
	_ = json.Unmarshal(m.Data, &req)
	var reply string
	switch req.Op {
	case "durableJoin":
		reply = `{"ok":true,"data":{"durable":true,"generation":1}}`
	case "listMemberships":
		reply = `{"ok":true,"data":{"memberships":[{"channel":"general","generation":1,"activated":true}]}}`
	case "durableLeave":
		reply = `{"ok":true,"data":{"channel":"general"}}`
	default:
		reply = `{"ok":false,"error":"op \"` + req.Op + `\" not supported on the delivery control service"}`
	}
	_ = m.Respond([]byte(reply))
}

// copyTo writes the reference's frame of frame.json for member actor with uid to DLV.
func (d *refDaemon) copyTo(actor, uid string) {
	d.t.Helper()
	h := nats.Header{}
	h.Set("Cotal-Delivery-Frame", "1")
	h.Set("Nats-Msg-Id", "m-0001:local."+actor+":"+uid+":1")
	_, err := d.js.PublishMsg(d.t.Context(), &nats.Msg{Subject: "cotal." + space + ".dlv.local." + actor + "." + uid, Header: h, Data: fixture(d.t, "frame.json")})
	if err != nil {
		d.t.Fatalf("the reference daemon's copy: %v", err)
	}
}

// await waits for a durable copy with text on ep and acks it.
func await(t *testing.T, ep *client.Endpoint, text string) {
	t.Helper()
	for {
		select {
		case in := <-ep.Messages():
			if err := in.Ack(); err != nil {
				t.Fatal(err)
			}
			if in.Message.Text() == text {
				if !in.Durable {
					t.Fatalf("%q arrived live, want from the hand-off durable", text)
				}
				return
			}
		case <-time.After(deadline):
			t.Fatalf("no copy %q reached the Go member", text)
		}
	}
}

// TestReferenceDaemonCopiesReachGoAgent (issue 25 item 2): on a space Go provisioned, a
// member Go minted is served by a reference delivery daemon, which creates no hand-off
// durable (the reference's provisionAgent makes it at mint): its durable join succeeds,
// and a copy the daemon stores in DLV_<s> reaches the member, online and after a restart.
func TestReferenceDaemonCopiesReachGoAgent(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	uid := protocol.NewLifecycleUID()
	bobCreds := member(t, m, js, "bob", uid)
	d := newRefDaemon(t, m)

	bob := connect(t, m, bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop with the reference daemon not established: %s", why)
	}
	d.copyTo("bob", uid)
	await(t, bob, "hello")

	// Offline: the copy waits in the durable made at mint and arrives at the next connect.
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set("Cotal-Delivery-Frame", "1")
	body := strings.Replace(strings.Replace(string(fixture(t, "frame.json")), "m-0001", "m-0003", 1), `"hello"`, `"while away"`, 1)
	if _, err := d.js.PublishMsg(t.Context(), &nats.Msg{Subject: "cotal." + space + ".dlv.local.bob." + uid, Header: h, Data: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	bob = connect(t, m, bobCreds)
	await(t, bob, "while away")
}

// TestReferenceFanoutEntriesMoved (issue 25 item 4): entries a reference fan-out wrote to
// INBOX_<s> (publishDinbox) are moved by the Go daemon's reader durable, as the reference's
// readerHandle does: an authorized entry inside the membership becomes the reference's
// frame on the member's DLV subject and reaches the Go member; one outside the member's
// read ACL, or past its leave, is dropped; one for a member without an ACL row is kept.
func TestReferenceFanoutEntriesMoved(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	runLane(t, m)
	uid := protocol.NewLifecycleUID()
	bobCreds := member(t, m, js, "bob", uid)
	bob := connect(t, m, bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	var row protocol.Membership
	if err := json.Unmarshal((&dlvMesh{Mesh: m, t: t, js: js}).get(protocol.BucketMembers(space), "general/local.bob."+uid), &row); err != nil {
		t.Fatal(err)
	}

	// The reference's fan-out, raw, with the delivery credential.
	fan := newRefDaemon(t, m)
	entry := func(subject, channel, id, text string, seq uint64) {
		t.Helper()
		var e map[string]any
		_ = json.Unmarshal(fixture(t, "inbox-entry.json"), &e)
		msg := e["msg"].(map[string]any)
		msg["id"], msg["channel"] = id, channel
		msg["parts"] = []any{map[string]any{"kind": "text", "text": text}}
		e["channel"], e["seq"], e["generation"] = channel, seq, row.Generation
		b, _ := json.Marshal(e)
		h := nats.Header{}
		h.Set("Nats-Msg-Id", id+":local.bob:"+uid+":1")
		if _, err := fan.js.PublishMsg(t.Context(), &nats.Msg{Subject: subject, Header: h, Data: b}); err != nil {
			t.Fatalf("publishDinbox on a Go space: %v", err)
		}
	}
	inbox := "cotal." + space + ".dinbox.local.bob." + uid
	entry(inbox, "secret", "m-10", "outside the read ACL", row.JoinCursor+1)
	entry(inbox, "general", "m-11", "before the join", row.JoinCursor)
	entry("cotal."+space+".dinbox.local.nobody."+protocol.NewLifecycleUID(), "general", "m-12", "no ACL row", row.JoinCursor+1)
	entry(inbox, "general", "m-13", "from the reference fan-out", row.JoinCursor+1)

	meshtest.Until(t, "the reader took every entry", deadline, func() bool {
		c, err := js.Consumer(t.Context(), protocol.StreamInbox(space), protocol.ConsumerReader)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.AckFloor.Stream >= 2
	})
	// The entry without an ACL row is deferred, not dropped: still held by the reader (it is
	// terminated only at its 10th delivery, 2 s apart).
	c, err := js.Consumer(t.Context(), protocol.StreamInbox(space), protocol.ConsumerReader)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(t.Context()); err != nil || info.AckFloor.Stream != 2 || info.NumAckPending == 0 {
		t.Fatalf("the entry of a member without an ACL row was settled: %+v %v", info, err)
	}
	bob = connect(t, m, bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	await(t, bob, "from the reference fan-out")
	if n := storedFor(t, js, "bob", uid); n != 1 {
		t.Fatalf("bob's DLV subject holds %d copies, want only the authorized one", n)
	}
	s, err := js.Stream(t.Context(), protocol.StreamDLV(space))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("DLV holds %d copies, want 1 (nothing for a member without an ACL row)", n)
	}
}
