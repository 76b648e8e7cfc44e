package a2apeer_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const (
	space = "prod"
	hang  = 20 * time.Second // a hang guard, not a timing assertion
)

// mesh is an operator-mode mesh with the space provisioned, and the agents' lifecycle
// uids (one per name, as the project's identity record keeps them).
type mesh struct {
	m  *meshtest.Mesh
	js jetstream.JetStream

	mu   sync.Mutex
	uids map[string]string
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	m := meshtest.Start(t, space)
	return &mesh{m: m, js: m.Provision(space, provision.Options{DefaultDeliveryClass: "live"}), uids: map[string]string{}}
}

func (tm *mesh) uid(name string) string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.uids[name] == "" {
		tm.uids[name] = protocol.NewLifecycleUID()
	}
	return tm.uids[name]
}

// agentCreds provisions the durables of agent name (with role) and mints its credential.
func (tm *mesh) agentCreds(ctx context.Context, t testing.TB, name, role string) (trust.Creds, error) {
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	uid := tm.uid(name)
	if _, err := provision.Agent(ctx, tm.js, space, p, uid, role); err != nil {
		return trust.Creds{}, err
	}
	b, err := tm.m.Account(space).Mint(trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid, Role: role})
	if err != nil {
		return trust.Creds{}, err
	}
	return trust.ReadCreds(b)
}

// connect is the bridge's Connect: the registered agent on its own agent credential.
func (tm *mesh) connect(t testing.TB) func(context.Context, a2apeer.Registration, client.Config) (*client.Endpoint, error) {
	return func(ctx context.Context, r a2apeer.Registration, cfg client.Config) (*client.Endpoint, error) {
		c, err := tm.agentCreds(ctx, t, r.Name, r.Role)
		if err != nil {
			return nil, err
		}
		cfg.LifecycleUID = c.LifecycleUID
		return client.Connect(ctx, tm.m.URL, cfg, c.Options()...)
	}
}

// person joins as agent name (a cotal peer that talks to the A2A one).
func (tm *mesh) person(t *testing.T, name string) *client.Endpoint {
	t.Helper()
	c, err := tm.agentCreds(t.Context(), t, name, "")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := client.Connect(t.Context(), tm.m.URL, client.Config{Space: space, Name: name, LifecycleUID: c.LifecycleUID}, c.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ep
}

// register registers the agent served at a as name, as `cotal a2a add` does.
func (tm *mesh) register(t *testing.T, a *agent, name, role string) a2apeer.Registration {
	t.Helper()
	c, cu, err := (a2apeer.HTTP{}).FetchCard(t.Context(), a.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a2apeer.FromCard(name, a.srv.URL, cu.String(), c, role, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := (&a2apeer.Store{JS: tm.js, Space: space}).Put(t.Context(), r, true); err != nil {
		t.Fatal(err)
	}
	return r
}

// bridge runs a bridge until the test ends (or stop is called) and waits until it read
// the registry.
func (tm *mesh) bridge(t *testing.T, tune func(*a2apeer.Bridge)) (stop func()) {
	t.Helper()
	ready := make(chan struct{})
	b := &a2apeer.Bridge{Space: space, JS: tm.js, Connect: tm.connect(t), PollEvery: 20 * time.Millisecond,
		RetryDelay: 10 * time.Millisecond, Ready: func() { close(ready) }}
	if tune != nil {
		tune(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bridge: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("bridge ended: %v", err)
	case <-time.After(hang):
		t.Fatal("bridge never read the registry")
	}
	return stop
}

// online waits until name is online in ep's roster, and returns its entry.
func online(t *testing.T, ep *client.Endpoint, name string) client.Peer {
	t.Helper()
	var got client.Peer
	meshtest.Until(t, name+" online", hang, func() bool {
		peers, err := ep.Roster(t.Context())
		if err != nil {
			return false
		}
		for _, p := range peers {
			if p.Card.Actor == name && p.Online {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// answer is the next message ep receives, which must be a DM from the A2A peer name.
func answer(t *testing.T, ep *client.Endpoint, name string) *client.Incoming {
	t.Helper()
	in := clienttest.Receive(t, ep, hang)
	if in.Kind != protocol.DeliveryDM || in.From.ID != "local."+name {
		t.Fatalf("got %s from %s: %q, want a DM from %s", in.Kind, in.From.ID, in.Text(), name)
	}
	_ = in.Ack()
	return in
}

// A registered agent is a peer: it shows in the roster with harness a2a and its card's
// skills (made safe), a DM to it becomes an A2A message and its answer a DM replying to
// it, the conversation keeps its A2A context, and an agent removed from the registry
// leaves the roster.
func TestBridgeDM(t *testing.T) {
	tm := newMesh(t)
	a := newAgent(t)
	r := tm.register(t, a, "echo", "")
	r.Token = true // the bridge sends the token the operator kept
	if err := (&a2apeer.Store{JS: tm.js, Space: space}).Put(t.Context(), r, true); err != nil {
		t.Fatal(err)
	}
	tm.bridge(t, func(b *a2apeer.Bridge) {
		b.Token = func(name string) (string, error) { return "tok-of-" + name, nil }
	})
	alice := tm.person(t, "alice")

	p := online(t, alice, "echo")
	if p.Harness() != a2apeer.Harness || len(p.Card.Skills) != 2 || p.Card.Skills[0].ID != "echo" || p.Card.Kind != protocol.CardAgent {
		t.Fatalf("card %+v, harness %q", p.Card, p.Harness())
	}
	if strings.ContainsAny(p.Card.Description, "\u202e\x1b") {
		t.Fatalf("description %q carries terminal controls", p.Card.Description)
	}

	echoP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "echo"}
	sent, err := alice.DM(t.Context(), echoP, client.Text("hello there"))
	if err != nil {
		t.Fatal(err)
	}
	in := answer(t, alice, "echo")
	if in.Text() != "echo: hello there" || in.ReplyTo != sent.ID {
		t.Fatalf("answer %q replying to %q, want the echo replying to %s", in.Text(), in.ReplyTo, sent.ID)
	}
	first := a.messages()[0]
	if first.MessageID != sent.ID || first.Role != "user" || first.ContextID != "" {
		t.Fatalf("A2A message %+v", first)
	}
	a.mu.Lock()
	auth := a.tokens[0]
	a.mu.Unlock()
	if auth != "Bearer tok-of-echo" {
		t.Fatalf("Authorization %q, want the kept token", auth)
	}
	// The second message of the conversation carries the context the agent gave.
	if _, err := alice.DM(t.Context(), echoP, client.Text("again")); err != nil {
		t.Fatal(err)
	}
	answer(t, alice, "echo")
	if got := a.messages()[1].ContextID; got != "ctx-"+sent.ID {
		t.Fatalf("second message context %q, want ctx-%s", got, sent.ID)
	}

	if _, err := (&a2apeer.Store{JS: tm.js, Space: space}).Delete(t.Context(), "echo"); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "echo offline once removed", hang, func() bool {
		peers, err := alice.Roster(t.Context())
		if err != nil {
			return false
		}
		for _, p := range peers {
			if p.Card.Actor == "echo" {
				return !p.Online
			}
		}
		return true
	})
}

// An anycast to the role an agent serves is sent to it; a task still working is
// followed until it completes, and its artifacts are the answer. A task that asks for
// input tells the asker, and the asker's next message continues that task.
func TestBridgeTasks(t *testing.T) {
	tm := newMesh(t)
	a := newAgent(t)
	a.reply = func(a *agent, m a2apeer.Message) (any, int) {
		switch {
		case m.TaskID != "": // the answer to a question: done
			t := a.tasks[m.TaskID]
			t.Status = a2apeer.TaskStatus{State: a2apeer.StateCompleted, Message: &a2apeer.Message{Kind: "message", Role: "agent",
				Parts: []a2apeer.Part{{Kind: "text", Text: "booked for " + m.Parts[0].Text}}}}
			c := *t
			return &c, http.StatusOK
		case strings.Contains(m.Parts[0].Text, "book"):
			t := a.task(m, a2apeer.StateInputRequired)
			t.Status.Message = &a2apeer.Message{Kind: "message", Role: "agent", Parts: []a2apeer.Part{{Kind: "text", Text: "which day?"}}}
			a.tasks[t.ID].Status = t.Status
			return t, http.StatusOK
		}
		return a.task(m, a2apeer.StateSubmitted), http.StatusOK
	}
	a.onGet = func(t *a2apeer.Task, gets int) {
		if gets >= 3 {
			t.Status.State = a2apeer.StateCompleted
			t.Artifacts = []a2apeer.Artifact{{ArtifactID: "a1", Parts: []a2apeer.Part{{Kind: "text", Text: "the report"},
				{Kind: "data", Data: []byte(`{"rows":3}`)}}}}
		} else {
			t.Status.State = a2apeer.StateWorking
		}
	}
	tm.register(t, a, "reporter", "reports")
	tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "reporter")

	sent, err := alice.Ask(t.Context(), "reports", client.Text("write the report"))
	if err != nil {
		t.Fatal(err)
	}
	in := answer(t, alice, "reporter")
	if in.Text() != "the report\n{\"rows\":3}" || in.ReplyTo != sent.ID {
		t.Fatalf("answer %q replying to %q", in.Text(), in.ReplyTo)
	}

	reporter := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "reporter"}
	if _, err := alice.DM(t.Context(), reporter, client.Text("book a room")); err != nil {
		t.Fatal(err)
	}
	in = answer(t, alice, "reporter")
	if !strings.HasPrefix(in.Text(), "which day?\n") || !strings.Contains(in.Text(), "needs more input") {
		t.Fatalf("question %q", in.Text())
	}
	if _, err := alice.DM(t.Context(), reporter, client.Text("friday")); err != nil {
		t.Fatal(err)
	}
	if in = answer(t, alice, "reporter"); in.Text() != "booked for friday" {
		t.Fatalf("answer %q", in.Text())
	}
	msgs := a.messages()
	if last := msgs[len(msgs)-1]; last.TaskID != msgs[len(msgs)-2].TaskID && last.TaskID == "" {
		t.Fatalf("the answer did not continue the task: %+v", last)
	}
}

// The cotal message is acked only once the agent accepted the call: while message/send
// has not answered, the DM is pending on the agent's durable; an agent that keeps
// failing is tried three times, and the asker is told it did not take the message.
func TestBridgeAckAfterAccept(t *testing.T) {
	tm := newMesh(t)
	a := newAgent(t)
	a.holdCalls()
	tm.register(t, a, "slow", "")
	tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "slow")
	slow := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "slow"}
	if _, err := alice.DM(t.Context(), slow, client.Text("take your time")); err != nil {
		t.Fatal(err)
	}
	durable := protocol.ConsumerDM(slow, tm.uid("slow"))
	pending := func() int {
		c, err := tm.js.Consumer(t.Context(), protocol.StreamDM(space), durable)
		if err != nil {
			return -1
		}
		info, err := c.Info(t.Context())
		if err != nil {
			return -1
		}
		return info.NumAckPending
	}
	meshtest.Until(t, "the call in flight", hang, func() bool { return len(a.messages()) == 1 })
	if n := pending(); n != 1 {
		t.Fatalf("ack pending %d while the agent has not accepted, want 1", n)
	}
	a.release()
	answer(t, alice, "slow")
	meshtest.Until(t, "acked once accepted", hang, func() bool { return pending() == 0 })

	a.mu.Lock()
	a.reply = func(*agent, a2apeer.Message) (any, int) { return nil, http.StatusServiceUnavailable }
	a.mu.Unlock()
	if _, err := alice.DM(t.Context(), slow, client.Text("are you there")); err != nil {
		t.Fatal(err)
	}
	in := answer(t, alice, "slow")
	if !strings.Contains(in.Text(), "did not take the message") || !strings.Contains(in.Text(), "503") {
		t.Fatalf("failure answer %q", in.Text())
	}
	if n := len(a.messages()); n != 4 {
		t.Fatalf("the agent was called %d times, want 1 + 3 tries", n)
	}
	meshtest.Until(t, "the failed message acked", hang, func() bool { return pending() == 0 })
}

// A bridge stopped while a call is in flight leaves the message for the next one: it is
// not acked, and the next bridge sends it again under the same A2A messageId.
func TestBridgeStopRedelivers(t *testing.T) {
	tm := newMesh(t)
	a := newAgent(t)
	a.holdCalls()
	tm.register(t, a, "slow", "")
	stop := tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "slow")
	sent, err := alice.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "slow"}, client.Text("one"))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the call in flight", hang, func() bool { return len(a.messages()) == 1 })
	stop()
	a.release() // the first call's handler answers a caller long gone
	tm.bridge(t, nil)
	in := answer(t, alice, "slow")
	if in.Text() != "echo: one" || in.ReplyTo != sent.ID {
		t.Fatalf("answer %q to %q", in.Text(), in.ReplyTo)
	}
	msgs := a.messages()
	if len(msgs) < 2 || msgs[len(msgs)-1].MessageID != sent.ID {
		t.Fatalf("messages %+v, want the same message sent again", msgs)
	}
}

// The registry is the operator's alone: an agent's own credential, on a raw connection,
// can neither write a row (which would make the bridge call a URL of its choosing as a
// peer of its choosing) nor read one.
func TestRegistryOperatorOnly(t *testing.T) {
	tm := newMesh(t)
	a := newAgent(t)
	tm.register(t, a, "echo", "")
	c, err := tm.agentCreds(t.Context(), t, "mallory", "")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	nc := meshtest.ConnectTo(t, tm.m.URL, []byte(credsFile(t, tm, "mallory", c)), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	bucket := a2apeer.Bucket(space)
	row := []byte(`{"name":"evil","url":"http://127.0.0.1:1","cardUrl":"http://127.0.0.1:1/.well-known/agent-card.json","endpoint":"http://127.0.0.1:1/rpc","added":1}`)
	if err := nc.Publish("$KV."+bucket+".evil", row); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("publish to the registry: %v", err)
		}
	case <-time.After(hang):
		t.Fatal("the broker did not refuse the registry write")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Refused publishes and requests get no answer: a short wait is enough to see none.
	short, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := js.Publish(short, "$KV."+bucket+".evil", row); err == nil {
		t.Fatal("a JetStream publish to the registry was stored")
	}
	if _, err := js.KeyValue(short, bucket); err == nil {
		t.Fatal("the agent opened the registry bucket")
	}
	if _, err := nc.Request("$JS.API.DIRECT.GET.KV_"+bucket+".$KV."+bucket+".echo", nil, 2*time.Second); err == nil {
		t.Fatal("the agent read a registry row by direct get")
	}
	if _, err := (&a2apeer.Store{JS: tm.js, Space: space}).Get(t.Context(), "evil"); !errors.Is(err, a2apeer.ErrNotFound) {
		t.Fatalf("the agent's row is in the registry: %v", err)
	}
}

// credsFile is the creds file of c, as Mint wrote it.
func credsFile(t *testing.T, tm *mesh, name string, c trust.Creds) string {
	t.Helper()
	b, err := tm.m.Account(space).Mint(trust.UserSpec{Name: name, Profile: trust.ProfileAgent,
		Principal: c.Principal, LifecycleUID: c.LifecycleUID})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
