package agentmcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

const space = "main"

func benchMesh(b *testing.B) string {
	b.Helper()
	srv := brokertest.Start(b)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := provision.Space(b.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		b.Fatal(err)
	}
	return srv.ClientURL()
}

func benchPeer(b *testing.B, url, name string, join bool) *client.Endpoint {
	b.Helper()
	ep, err := client.Connect(b.Context(), url, client.Config{Space: space, Name: name})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ep.Close() })
	if join {
		if err := ep.Join(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	return ep
}

// channelTap hands ChannelMethod notifications to got before the SDK client sees them.
type channelTap struct {
	mcp.Transport
	got chan json.RawMessage
}

func (t channelTap) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return tapConn{c, t.got}, nil
}

type tapConn struct {
	mcp.Connection
	got chan json.RawMessage
}

func (c tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		m, err := c.Connection.Read(ctx)
		if r, ok := m.(*jsonrpc.Request); err == nil && ok && r.Method == agentmcp.ChannelMethod {
			c.got <- r.Params
			continue
		}
		return m, err
	}
}

// serve runs an agentmcp.Server for agent on in-memory transports and returns the
// client session and the channel notifications it receives.
func serve(b *testing.B, url string, push bool) (*mcp.ClientSession, chan json.RawMessage) {
	b.Helper()
	ep := benchPeer(b, url, "agent", false)
	st, ct := mcp.NewInMemoryTransports()
	srv := &agentmcp.Server{Endpoint: ep}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	b.Cleanup(func() { cancel(); <-done })
	var caps *mcp.ClientCapabilities
	if push {
		caps = &mcp.ClientCapabilities{Experimental: map[string]any{agentmcp.ChannelCapability: map[string]any{}}}
	}
	got := make(chan json.RawMessage, 1024)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).
		Connect(b.Context(), channelTap{ct, got}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs, got
}

// BenchmarkDMRoundTrip compares a cotal_dm tool call through the MCP layer (in-memory
// transports, the SDK client) with what it does called directly on the same broker
// (client.Resolve of the name, then client.DM): mcp-vs-direct is the ratio of their
// times per DM, and mcp-µs/dm minus direct-µs/dm is what the MCP layer adds.
func BenchmarkDMRoundTrip(b *testing.B) {
	url := benchMesh(b)
	benchPeer(b, url, "bob", true)
	direct := benchPeer(b, url, "carol", false)
	cs, _ := serve(b, url, false)
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	args := map[string]any{"to": "bob", "text": "ping"}
	var viaMCP, viaSDK time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		to, err := direct.Resolve(b.Context(), "bob") // cotal_dm resolves the name each call
		if err != nil || to.Principal != bob {
			b.Fatalf("resolve bob: %v %+v", err, to)
		}
		if _, err := direct.DM(b.Context(), to.Principal, client.Text("ping")); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "cotal_dm", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("cotal_dm: %v %+v", err, res)
		}
		viaSDK += t1.Sub(t0)
		viaMCP += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaSDK.Microseconds())/n, "direct-µs/dm")
	b.ReportMetric(float64(viaMCP.Microseconds())/n, "mcp-µs/dm")
	b.ReportMetric(viaMCP.Seconds()/viaSDK.Seconds(), "mcp-vs-direct")
}

// BenchmarkDMToPush compares the time from a peer's DM to the claude/channel notification
// at the MCP client with the time from a DM to the SDK's own receive (Messages()):
// push-vs-receive is the ratio.
func BenchmarkDMToPush(b *testing.B) {
	url := benchMesh(b)
	sender := benchPeer(b, url, "bob", true)
	receiver := benchPeer(b, url, "dave", true)
	_, got := serve(b, url, true)
	agent := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "agent"}
	dave := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "dave"}
	// The agent joined once a DM reaches it.
	waitPush := func() {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			b.Fatal("no push")
		}
	}
	for {
		if _, err := sender.DM(b.Context(), agent, client.Text("warm")); err != nil {
			b.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(100 * time.Millisecond):
			continue // not joined yet: send again
		}
		break
	}
	for len(got) > 0 {
		<-got
	}
	var push, recv time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := sender.DM(b.Context(), dave, client.Text("ping")); err != nil {
			b.Fatal(err)
		}
		select {
		case in := <-receiver.Messages():
			if err := in.Ack(); err != nil {
				b.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			b.Fatal("no receive")
		}
		t1 := time.Now()
		if _, err := sender.DM(b.Context(), agent, client.Text("ping")); err != nil {
			b.Fatal(err)
		}
		waitPush()
		recv += t1.Sub(t0)
		push += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(recv.Microseconds())/n, "receive-µs/dm")
	b.ReportMetric(float64(push.Microseconds())/n, "push-µs/dm")
	b.ReportMetric(push.Seconds()/recv.Seconds(), "push-vs-receive")
}
