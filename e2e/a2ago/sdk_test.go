package a2ago_test

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const space = "main"

// agent connects name on its real minted agent credential and joins the space.
func agent(t *testing.T, m *meshtest.Mesh, name string, caps ...string) *client.Endpoint {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(t.Context(), m.Provisioner(space), space, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p,
		LifecycleUID: uid, Subscribe: []string{}, Capabilities: caps}))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: space, Name: name, LifecycleUID: uid,
		Description: name + " reviews code"}, c.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ep
}

// gateway serves expose as local.a2a on a real loopback listener and returns its URL.
func gateway(t *testing.T, m *meshtest.Mesh, expose ...string) string {
	t.Helper()
	ep := agent(t, m, "a2a", trust.CapabilityA2AGateway)
	js, err := jetstream.New(ep.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), protocol.BucketA2A(space))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	g, err := a2agw.New(a2agw.Config{Endpoint: ep, Bucket: kv, Expose: expose, BaseURL: "http://" + srv.Listener.Addr().String(),
		Port: srv.Listener.Addr().(*net.TCPAddr).Port, BlockFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g.Handler()
	srv.Start()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv.URL
}

// replies answers every message bob receives with text, a reply to it, until the test ends.
func replies(t *testing.T, bob *client.Endpoint, text string) {
	go func() {
		for in := range bob.Messages() {
			from, err := protocol.ParsePrincipal(in.From.ID)
			if err == nil {
				_, err = bob.DM(context.Background(), from, client.Draft{Parts: []protocol.Part{protocol.TextPart(text)}, ReplyTo: in.ID})
			}
			if err != nil && t.Context().Err() == nil {
				t.Errorf("bob's reply: %v", err)
			}
			_ = in.Ack()
		}
	}()
}

// sdkClient resolves bob's card with the SDK and makes a client from it (JSON-RPC, the
// transport the card prefers).
func sdkClient(t *testing.T, base string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), base+"/agents/bob")
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "bob" || !card.Capabilities.Streaming {
		t.Fatalf("bob's card as the SDK reads it: %+v", card)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func textOf(parts a2a.ContentParts) string {
	s := ""
	for _, p := range parts {
		if tp, ok := p.(a2a.TextPart); ok {
			s += tp.Text
		}
	}
	return s
}

// TestGoSDKSend: the Go SDK's message/send reaches bob as a DM and returns the completed
// task with bob's reply as its artifact; tasks/get reads it back.
func TestGoSDKSend(t *testing.T) {
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	bob := agent(t, m, "bob")
	replies(t, bob, "reviewed: looks fine")
	c := sdkClient(t, gateway(t, m, "agent:bob"))

	res, err := c.SendMessage(t.Context(), &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "review x.go"})})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send returned %T, want a task", res)
	}
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || textOf(task.Artifacts[0].Parts) != "reviewed: looks fine" {
		t.Fatalf("task %+v", task)
	}
	got, err := c.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("tasks/get %+v", got.Status)
	}
}

// TestGoSDKStream: the Go SDK's message/stream sees the task, bob's reply as an
// artifact, and a final completed status.
func TestGoSDKStream(t *testing.T) {
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	bob := agent(t, m, "bob")
	replies(t, bob, "2 nits")
	c := sdkClient(t, gateway(t, m, "agent:bob"))

	var art string
	var last *a2a.TaskStatusUpdateEvent
	sawTask := false
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "review y.go"})}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			sawTask = true
		case *a2a.TaskArtifactUpdateEvent:
			art = textOf(e.Artifact.Parts)
		case *a2a.TaskStatusUpdateEvent:
			last = e
		}
	}
	if !sawTask || art != "2 nits" || last == nil || !last.Final || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("stream: task %v, artifact %q, last status %+v", sawTask, art, last)
	}
}
