package interop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// deadline guards every wait against a hang; no test waits for it to pass.
const deadline = 20 * time.Second

const space = "team"

// dlvMesh is a provisioned space with a Go delivery daemon serving it.
type dlvMesh struct {
	*meshtest.Mesh
	t  *testing.T
	js jetstream.JetStream
}

func newDLVMesh(t *testing.T) *dlvMesh {
	m := &dlvMesh{Mesh: meshtest.Start(t, space), t: t}
	m.js = m.Provision(space, provision.Options{})
	return m
}

// serve runs the Go delivery daemon until the test ends.
func (m *dlvMesh) serve() {
	l := deliverytest.Lane(m.t, m.Mesh, space)
	l.AckWait = 2 * time.Second
	deliverytest.Serve(m.t, l)
}

// agent mints an agent credential for actor with uid, reading and posting on channels,
// with its DM durable as cotal up makes it.
func (m *dlvMesh) agent(actor, uid string, channels ...string) []byte {
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	if _, err := provision.Agent(m.t.Context(), m.js, space, p, uid, ""); err != nil {
		m.t.Fatal(err)
	}
	return m.Mint(space, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: channels, AllowPublish: channels})
}

// put writes a row raw, as another implementation would.
func (m *dlvMesh) put(bucket, key string, value []byte) {
	kv, err := m.js.KeyValue(m.t.Context(), bucket)
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := kv.Put(m.t.Context(), key, value); err != nil {
		m.t.Fatal(err)
	}
}

func (m *dlvMesh) get(bucket, key string) []byte {
	kv, err := m.js.KeyValue(m.t.Context(), bucket)
	if err != nil {
		m.t.Fatal(err)
	}
	e, err := kv.Get(m.t.Context(), key)
	if err != nil {
		m.t.Fatalf("%s %s: %v", bucket, key, err)
	}
	return e.Value()
}

// endpoint connects a Go endpoint with creds and joins the space.
func (m *dlvMesh) endpoint(creds []byte) *client.Endpoint {
	c, err := trust.ReadCreds(creds)
	if err != nil {
		m.t.Fatal(err)
	}
	ep, err := client.Connect(m.t.Context(), m.URL, client.Config{Space: space, Name: c.Principal.Actor, LifecycleUID: c.LifecycleUID,
		Heartbeat: time.Hour, Logger: brokertest.Logger(m.t)}, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(m.t.Context()); err != nil {
		m.t.Fatal(err)
	}
	return ep
}

// foreign connects a raw nats.go peer with creds (no project package on its side).
func (m *dlvMesh) foreign(creds []byte) *nats.Conn {
	c, err := trust.ReadCreds(creds)
	if err != nil {
		m.t.Fatal(err)
	}
	nc, err := nats.Connect(m.URL, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(nc.Close)
	return nc
}

// ask sends body on the delivery rail of owner.actor as the reference does: no headers,
// the reply subject <subject>.reply.<dashed uuid>.
func ask(t *testing.T, nc *nats.Conn, actor string, body []byte) []byte {
	t.Helper()
	subject := "cotal." + space + ".ctl.delivery.local." + actor
	reply := subject + ".reply." + uuid.NewString()
	sub, err := nc.SubscribeSync(reply)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: body}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(deadline)
	if err != nil {
		t.Fatalf("no answer to %s: %v", body, err)
	}
	if len(m.Header) != 0 {
		t.Fatalf("answer with headers %v", m.Header)
	}
	return m.Data
}

// withUID puts uid in a fixture written for the placeholder uid.
func withUID(b []byte, uid string) []byte {
	return []byte(strings.ReplaceAll(string(b), "abcdefghijklmnopqrstuvwxyz", uid))
}

// TestForeignDurableMember: a member that speaks only raw nats.go, whose read ACL row
// the reference's provisioner wrote, joins a durable channel with a headerless
// durableJoin, lists and leaves its membership, and reads the reference's frames from its
// bind-only durable; every request, reply and row is the reference's, field for field.
func TestForeignDurableMember(t *testing.T) {
	m := newDLVMesh(t)
	uid := protocol.NewLifecycleUID()
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	m.put(protocol.BucketACL(space), protocol.MemberKey(bob, uid), fixture(t, "acl.json"))
	m.serve()
	bobCreds := m.agent("bob", uid, "general")
	nc := m.foreign(bobCreds)

	sameJSON(t, "durableJoin", ask(t, nc, "bob", fixture(t, "durableJoin.request.json")), fixture(t, "durableJoin.reply.json"))
	sameJSON(t, "listMemberships", ask(t, nc, "bob", withUID(fixture(t, "listMemberships.request.json"), uid)), fixture(t, "listMemberships.reply.json"))
	sameJSON(t, "sender mismatch", ask(t, nc, "bob", []byte(`{"op":"durableJoin","args":{"channel":"general"},"from":{"id":"local.eve","name":"eve"}}`)),
		fixture(t, "senderMismatch.reply.json"))

	row := rowLike(t, m.get(protocol.BucketMembers(space), "general/"+protocol.MemberKey(bob, uid)), uid)
	sameJSON(t, "members row", row, fixture(t, "members.json"))

	alice := m.endpoint(m.agent("alice", protocol.NewLifecycleUID(), "general"))
	sent, err := alice.Post(t.Context(), "general", client.Text("for bob"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(t.Context(), "DLV_"+space, "dlv_local-bob-"+uid)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(deadline))
	if err != nil {
		t.Fatal(err)
	}
	var frame jetstream.Msg
	for msg := range batch.Messages() {
		frame = msg
	}
	if frame == nil {
		t.Fatalf("no frame: %v", batch.Error())
	}
	if v := frame.Headers().Get("Cotal-Delivery-Frame"); v != "1" {
		t.Fatalf("Cotal-Delivery-Frame %q", v)
	}
	if id := frame.Headers().Get("Nats-Msg-Id"); id != sent.ID+":local.bob:"+uid+":1" {
		t.Fatalf("Nats-Msg-Id %q", id)
	}
	if keys := topKeys(t, frame.Data()); strings.Join(keys, ",") != "version,channel,msg" {
		t.Fatalf("frame keys %v", keys)
	}
	var f struct {
		Version int    `json:"version"`
		Channel string `json:"channel"`
		Msg     struct {
			ID      string `json:"id"`
			Channel string `json:"channel"`
			From    struct {
				ID string `json:"id"`
			} `json:"from"`
		} `json:"msg"`
	}
	if err := json.Unmarshal(frame.Data(), &f); err != nil || f.Version != 1 || f.Channel != "general" || f.Msg.Channel != "general" ||
		f.Msg.ID != sent.ID || f.Msg.From.ID != "local.alice" {
		t.Fatalf("frame %s: %v", frame.Data(), err)
	}
	if err := frame.Ack(); err != nil {
		t.Fatal(err)
	}

	sameJSON(t, "durableLeave", ask(t, nc, "bob", withUID(fixture(t, "durableLeave.request.json"), uid)), fixture(t, "durableLeave.reply.json"))
	row = rowLike(t, m.get(protocol.BucketMembers(space), "general/"+protocol.MemberKey(bob, uid)), uid)
	var tomb map[string]any
	_ = json.Unmarshal(row, &tomb)
	tomb["leaveCursor"] = float64(3) // the CHAT sequence of the leave: one post here
	got, _ := json.Marshal(tomb)
	sameJSON(t, "tombstone", got, fixture(t, "members-tombstone.json"))
	sameJSON(t, "durableLeave again", ask(t, nc, "bob", withUID(fixture(t, "durableLeave.request.json"), uid)),
		[]byte(`{"ok":true,"data":{"channel":"general","alreadyLeft":true}}`))
}

// rowLike returns a members row Go wrote with its time and uid set to the fixture's.
func rowLike(t *testing.T, b []byte, uid string) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r["lifecycleUid"] != uid {
		t.Fatalf("row %s: uid", b)
	}
	r["lifecycleUid"], r["updatedAt"] = "abcdefghijklmnopqrstuvwxyz", float64(1700000000000)
	out, _ := json.Marshal(r)
	return out
}

// jetstreamDLV is the hand-off durable an earlier Go daemon made for (p, uid).
func jetstreamDLV(p protocol.Principal, uid string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: protocol.ConsumerDLV(p, uid), FilterSubject: protocol.DLVSubject(space, p, uid),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: provision.AckWait, DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1000}
}
