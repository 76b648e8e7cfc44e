package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// TestOfflineMemberGetsEveryPostOnce: a member offline during 100 durable posts receives
// all 100, once each and in order, after it returns, though the daemon was restarted in
// the middle (and nothing ran for a stretch of the posts).
func TestOfflineMemberGetsEveryPostOnce(t *testing.T) {
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`) // nothing may arrive as history: only the backstop
	d1 := serve(t, m.lane())

	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}

	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 50)
	if err := d1.stop(t); err != nil { // very likely in the middle of copying
		t.Fatalf("clean stop: %v", err)
	}
	postTexts(t, alice, 50, 75)
	serve(t, m.lane())
	postTexts(t, alice, 75, 100)

	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		in := clienttest.Receive(t, bob, deadline)
		if !in.Durable || in.Text() != text(i) || in.Subject.Channel != "general" || in.From.ID != "local.alice" {
			t.Fatalf("message %d: durable %v %q on %s from %s, want durable %q", i, in.Durable, in.Text(), in.Subject.Channel, in.From.ID, text(i))
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// Exactly once, where it is stored: 100 copies, none left to deliver.
	if n := m.stored("bob"); n != 100 {
		t.Fatalf("DLV holds %d copies for bob, want 100", n)
	}
	cons, err := m.js.Consumer(t.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's hand-off drained", deadline, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	select {
	case in := <-bob.Messages():
		t.Fatalf("extra message %q", in.Text())
	default:
	}
}

// TestLiveAndDurableDedupe: an online member sees each post once, though it may arrive
// both live and from the backstop (the daemon copies what the member's confirmed
// position did not cover within the grace); every copy made is acked all the same.
func TestLiveAndDurableDedupe(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 20)
	for i := range 20 {
		in := clienttest.Receive(t, bob, deadline)
		if in.Text() != text(i) {
			t.Fatalf("message %d: %q", i, in.Text())
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	fan, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "every post passed by the fan-out", deadline, func() bool {
		info, err := fan.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= 20
	})
	cons, err := m.js.Consumer(t.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "durable copies acked", deadline, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	t.Logf("copies made for bob: %d of 20", m.stored("bob"))
	select {
	case in := <-bob.Messages():
		t.Fatalf("duplicate %q (durable %v)", in.Text(), in.Durable)
	default:
	}
}

// TestOutsideReadACLGetsNothing: a membership row for a member whose credential cannot
// read the channel yields no copy, and the daemon refuses such a durable join, a request
// presenting someone else's credential, and an unsigned one.
func TestOutsideReadACLGetsNothing(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	carolCreds := m.agent("carol", "random")
	carol := m.endpoint(carolCreds)
	if err := carol.JoinChannel(t.Context(), "random"); err != nil { // records carol's ACL
		t.Fatal(err)
	}
	if ok, why, _ := carol.Backstop("random"); !ok {
		t.Fatalf("carol's backstop: %s", why)
	}
	carolP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "carol"}
	ctl := protocol.CtlSubject(space, protocol.ServiceDelivery, carolP)
	nc := m.Connect(carolCreds)
	join := protocol.ControlRequest{Op: protocol.OpJoin, Args: args(t, protocol.MembershipArgs{Channel: "general"}), From: protocol.EndpointRef{ID: carolP.String()}}
	if rep := m.rawRequest(nc, carolCreds, "", ctl, join); rep.OK || !strings.Contains(rep.Error, "not within your read ACL") {
		t.Fatalf("durable join outside the ACL: %+v", rep)
	}
	bobCreds := m.agent("bob", "general")
	bobJWT := strings.TrimSpace(strings.Split(string(bobCreds), "------END NATS USER JWT------")[0])
	bobJWT = bobJWT[strings.LastIndex(bobJWT, "\n")+1:]
	if rep := m.rawRequest(nc, carolCreds, bobJWT, ctl, join); rep.OK || !strings.Contains(rep.Error, "credential refused") {
		t.Fatalf("carol presenting bob's JWT: %+v", rep)
	}
	if rep := m.rawRequest(nc, nil, "", ctl, join); rep.OK || !strings.Contains(rep.Error, "not within your read ACL") {
		t.Fatalf("unsigned request (the ACL row recorded at carol's join decides): %+v", rep)
	}
	forged := protocol.ControlRequest{Op: protocol.OpDurableJoin, Args: args(t, protocol.DurableJoinArgs{Channel: "random"}), From: protocol.EndpointRef{ID: "local.bob"}}
	if rep := m.rawRequest(nc, nil, "", ctl, forged); rep.OK || rep.Error != protocol.SenderMismatch {
		t.Fatalf("from.id of another principal: %+v", rep)
	}

	// A row for carol on general, written behind the daemon's back.
	members, err := m.js.KeyValue(t.Context(), protocol.BucketMembers(space))
	if err != nil {
		t.Fatal(err)
	}
	row := `{"channel":"general","principal":"local.carol","lifecycleUid":"` + m.uid("carol") + `","state":"durable-active","joinCursor":0,"generation":1}`
	if _, err := members.Put(t.Context(), protocol.MembershipKey("general", carolP, m.uid("carol")), []byte(row)); err != nil {
		t.Fatal(err)
	}
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 10)
	meshtest.Until(t, "bob's 10 copies", deadline, func() bool { return m.stored("bob") == 10 })
	if n := m.stored("carol"); n != 0 {
		t.Fatalf("carol, outside the read ACL of general, has %d copies", n)
	}
}

// TestLeaveStopsCopies: after a member leaves, posts from the leave on are not copied to it.
func TestLeaveStopsCopies(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	bob := m.endpoint(m.agent("bob", "general"))
	dave := m.endpoint(m.agent("dave", "general"))
	for _, ep := range []*client.Endpoint{bob, dave} {
		if err := ep.JoinChannel(t.Context(), "general"); err != nil {
			t.Fatal(err)
		}
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 5)
	meshtest.Until(t, "bob's first copies", deadline, func() bool { return m.stored("bob") == 5 })
	if err := bob.LeaveChannel("general"); err != nil {
		t.Fatal(err)
	}
	list, err := bob.Memberships(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("memberships after leave: %+v, %v", list, err)
	}
	postTexts(t, alice, 5, 10)
	meshtest.Until(t, "dave's 10 copies", deadline, func() bool { return m.stored("dave") == 10 })
	if n := m.stored("bob"); n != 5 {
		t.Fatalf("bob has %d copies after leaving, want the 5 from before", n)
	}
}

// TestMentionOnLiveChannel: a live channel is not backed, but an @mention gets the
// mentioned member a durable copy, if it may read the channel, and a mention notice
// without the text if it may not.
func TestMentionOnLiveChannel(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	m.setChannel("random", `{"deliveryClass":"live"}`)
	bob := m.endpoint(m.agent("bob", "general", "random"))
	eve := m.endpoint(m.agent("eve", "general"))
	for _, ep := range []*client.Endpoint{bob, eve} { // durable joins record their ACLs
		if err := ep.JoinChannel(t.Context(), "general"); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.JoinChannel(t.Context(), "random"); err != nil {
		t.Fatal(err)
	}
	if _, why, _ := bob.Backstop("random"); why != "not a durable channel" {
		t.Fatalf("random's backstop: %q", why)
	}
	alice := m.endpoint(m.agent("alice", "general", "random"))
	for _, d := range []client.Draft{
		{Parts: client.Text("hey @bob").Parts, Mentions: []string{"Bob", "eve"}},
		client.Text("nobody"),
		{Parts: client.Text("again @bob").Parts, Mentions: []string{"bob"}},
	} {
		if _, err := alice.Post(t.Context(), "random", d); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Until(t, "bob's mention copies and eve's notice", deadline, func() bool { return m.stored("bob") == 2 && m.stored("eve") == 1 })
	// eve cannot read random: she gets a notice of the mention, never its text.
	if c := m.lastCopy("eve"); c.Header.Get(protocol.HeaderReason) != protocol.HandoffMentionNotice || strings.Contains(string(c.Data), "hey") {
		t.Fatalf("eve, who cannot read random, has copy %q: %s", c.Header.Get(protocol.HeaderReason), c.Data)
	}
	s, err := m.js.Stream(t.Context(), protocol.StreamDLV(space))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(t.Context(), protocol.DLVSubject(space, bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	if r := msg.Header.Get(protocol.HeaderReason); r != protocol.HandoffLiveMention {
		t.Fatalf("reason %q", r)
	}
}

// TestCatchUpCopiesWhatTheFanoutPassed: a durable join whose cursor is behind the
// fan-out gets the posts in between copied, once, in order.
func TestCatchUpCopiesWhatTheFanoutPassed(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	dave := m.endpoint(m.agent("dave", "general"))
	if err := dave.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 8)
	meshtest.Until(t, "fan-out past the posts", deadline, func() bool { return m.stored("dave") == 8 })
	// bob asks to join from sequence 3, as a client that captured it earlier would.
	bobCreds := m.agent("bob", "general")
	nc := m.Connect(bobCreds)
	bobP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	st, err := m.js.Stream(t.Context(), protocol.StreamChat(space))
	if err != nil {
		t.Fatal(err)
	}
	first := st.CachedInfo().State.FirstSeq
	rep := m.rawRequest(nc, bobCreds, "", protocol.CtlSubject(space, protocol.ServiceDelivery, bobP), protocol.ControlRequest{Op: protocol.OpJoin,
		Args: args(t, protocol.MembershipArgs{Channel: "general", Cursor: first + 2}), From: protocol.EndpointRef{ID: bobP.String()}})
	if !rep.OK {
		t.Fatalf("join: %s", rep.Error)
	}
	meshtest.Until(t, "bob's catch-up", deadline, func() bool { return m.stored("bob") == 5 })
	cons, err := m.js.Consumer(t.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(bobP, m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 3
	for msg := range batch.Messages() {
		if !strings.Contains(string(msg.Data()), text(i)) {
			t.Fatalf("copy %d: %s", i, msg.Data())
		}
		i++
	}
	if i != 8 {
		t.Fatalf("read %d copies", i-3)
	}
}

// TestProbe: the live probe says bound while a daemon serves and unbound otherwise.
func TestProbe(t *testing.T) {
	m := newMesh(t, 0)
	bob := m.endpoint(m.agent("bob", "general"))
	if p, err := bob.ProbeDelivery(t.Context()); err != nil || p.Responder != protocol.ResponderUnbound {
		t.Fatalf("no daemon: %+v, %v", p, err)
	}
	l := m.lane()
	l.Instance = "probe-test"
	d := serve(t, l)
	if p, err := bob.ProbeDelivery(t.Context()); err != nil || p.Responder != protocol.ResponderBound || p.Instance != "probe-test" || p.Plane != "delivery" {
		t.Fatalf("serving: %+v, %v", p, err)
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	if p, err := bob.ProbeDelivery(ctx); err != nil || p.Responder != protocol.ResponderUnbound {
		t.Fatalf("stopped: %+v, %v", p, err)
	}
}

// TestUnestablishedWithoutDaemon: with no daemon, a durable channel joins live and says so.
func TestUnestablishedWithoutDaemon(t *testing.T) {
	m := newMesh(t, 0)
	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	ok, why, joined := bob.Backstop("general")
	if ok || !joined || !strings.HasPrefix(why, client.Unestablished) {
		t.Fatalf("backstop %v %q %v", ok, why, joined)
	}
}
