package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// deadline guards every wait against a hang; no test waits for it to pass.
const deadline = 20 * time.Second

const space = "team"

// mesh is an operator-mode broker serving one provisioned space, with the provisioner's
// JetStream context.
type mesh struct {
	*meshtest.Mesh
	t    testing.TB
	prov *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	uids map[string]string
}

// newMesh starts the broker and provisions the space with a short lease TTL.
func newMesh(t testing.TB, leaseTTL time.Duration) *mesh {
	t.Helper()
	m := &mesh{Mesh: meshtest.Start(t, space), t: t, uids: map[string]string{}}
	m.js = m.Provision(space, provision.Options{LeaseTTL: leaseTTL})
	m.prov = m.js.Conn()
	return m
}

// restart stops the broker and starts it again on the same port and store, and
// reconnects the provisioner.
func (m *mesh) restart() {
	m.t.Helper()
	m.Restart()
	m.js = m.Provisioner(space)
	m.prov = m.js.Conn()
}

// uid is the actor's lifecycle uid, the same every time.
func (m *mesh) uid(actor string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.uids[actor] == "" {
		m.uids[actor] = protocol.NewLifecycleUID()
	}
	return m.uids[actor]
}

// agent mints an agent credential for actor that reads and posts on channels, with its DM
// durable pre-created as cotal up does.
func (m *mesh) agent(actor string, channels ...string) []byte {
	m.t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	if _, err := provision.Agent(m.t.Context(), m.js, space, p, m.uid(actor), ""); err != nil {
		m.t.Fatal(err)
	}
	return m.Mint(space, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: m.uid(actor),
		AllowSubscribe: channels, AllowPublish: channels})
}

// endpoint connects an endpoint holding creds and joins the space (no channel yet).
func (m *mesh) endpoint(creds []byte) *client.Endpoint {
	m.t.Helper()
	return m.endpointInbox(creds, 1024)
}

// endpointInbox is endpoint with a Messages() buffer of inbox.
func (m *mesh) endpointInbox(creds []byte, inbox int) *client.Endpoint {
	m.t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		m.t.Fatal(err)
	}
	ep, err := client.Connect(m.t.Context(), m.URL, client.Config{Space: space, Name: c.Principal.Actor, LifecycleUID: c.LifecycleUID,
		Heartbeat: time.Hour, InboxSize: inbox, Logger: brokertest.Logger(m.t)},
		nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(m.t.Context()); err != nil {
		m.t.Fatal(err)
	}
	return ep
}

// lane is a delivery lane for the mesh with small timings.
func (m *mesh) lane() *Lane {
	return &Lane{Space: space, Server: m.URL, Logger: brokertest.Logger(m.t),
		Creds: m.Mint(space, meshtest.DeliverySpec()), ReconnectWait: 50 * time.Millisecond, AckWait: 2 * time.Second, OpTimeout: 3 * time.Second}
}

// running is a lane running in the background.
type running struct {
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan error
}

// start starts l and returns without waiting for it to serve.
func start(t testing.TB, l *Lane) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{cancel: cancel, ready: make(chan struct{}), done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx, func() { close(r.ready) }) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// serve starts l and waits until it serves.
func serve(t testing.TB, l *Lane) *running {
	t.Helper()
	r := start(t, l)
	select {
	case <-r.ready:
	case err := <-r.done:
		t.Fatalf("lane ended before serving: %v", err)
	case <-time.After(deadline):
		t.Fatal("lane did not serve")
	}
	return r
}

// stop cancels the lane and returns what Run returned.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(deadline):
		t.Fatal("lane did not stop")
		return nil
	}
}

// ended waits for the lane to end by itself and returns its error.
func (r *running) ended(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(deadline):
		t.Fatal("lane did not end")
		return nil
	}
}

// stored is how many hand-off copies DLV holds for actor.
func (m *mesh) stored(actor string) uint64 {
	m.t.Helper()
	s, err := m.js.Stream(m.t.Context(), protocol.StreamDLV(space))
	if err != nil {
		m.t.Fatal(err)
	}
	subj := protocol.DLVSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}, m.uid(actor))
	info, err := s.Info(m.t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		m.t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// setChannel writes a channel registry entry.
func (m *mesh) setChannel(name, value string) {
	m.t.Helper()
	kv, err := m.js.KeyValue(m.t.Context(), protocol.BucketChannels(space))
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := kv.Put(m.t.Context(), name, []byte(value)); err != nil {
		m.t.Fatal(err)
	}
}

// rawRequest sends a control request on subject as the holder of signer's creds, with
// token as its JWT (signer's own when empty), and returns the daemon's answer.
func (m *mesh) rawRequest(nc *nats.Conn, signer []byte, token, subject string, req protocol.ControlRequest) protocol.ControlReply {
	m.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		m.t.Fatal(err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	if signer != nil {
		c, err := trust.ReadCreds(signer)
		if err != nil {
			m.t.Fatal(err)
		}
		kp, err := jwt.ParseDecoratedNKey(signer)
		if err != nil {
			m.t.Fatal(err)
		}
		sig, err := kp.Sign(protocol.SignedBytes(subject, body))
		if err != nil {
			m.t.Fatal(err)
		}
		if token == "" {
			token = c.JWT
		}
		msg.Header.Set(protocol.HeaderJWT, token)
		msg.Header.Set(protocol.HeaderSig, base64.RawURLEncoding.EncodeToString(sig))
	}
	msg.Reply = subject + ".reply." + protocol.NewLifecycleUID()
	sub, err := nc.SubscribeSync(msg.Reply)
	if err != nil {
		m.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(msg); err != nil {
		m.t.Fatal(err)
	}
	ans, err := sub.NextMsg(deadline)
	if err != nil {
		m.t.Fatalf("no answer on %s: %v", subject, err)
	}
	var rep protocol.ControlReply
	if err := json.Unmarshal(ans.Data, &rep); err != nil {
		m.t.Fatalf("answer %q: %v", ans.Data, err)
	}
	return rep
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func text(i int) string { return fmt.Sprintf("post %03d", i) }

// postTexts posts text(from) to text(to-1), in order, as ep to general.
func postTexts(t testing.TB, ep *client.Endpoint, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := ep.Post(t.Context(), "general", client.Text(text(i))); err != nil {
			t.Fatal(err)
		}
	}
}
