package agentmcp_test

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// BenchmarkWaitWakeUp measures how soon a blocked cotal_wait returns a DM, from the
// moment the DM is sent to the moment the MCP client has the tool result, against a raw
// core subscription on the agent's DM subject receiving the same publish in the same
// iteration: wait-µs/dm and raw-µs/dm, and wait-vs-raw their ratio.
func BenchmarkWaitWakeUp(b *testing.B) {
	url := benchMesh(b)
	sender := benchPeer(b, url, "bob", true)
	cs, _ := serve(b, url, false)
	agent := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "agent"}
	raw, err := sender.Conn().SubscribeSync(protocol.DMFilter(space, agent))
	if err != nil {
		b.Fatal(err)
	}
	wait := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "cotal_wait", Arguments: map[string]any{"timeout": 30}})
	}
	meshtest.Until(b, "the agent joined: a DM to it is accepted", 20*time.Second, func() bool {
		_, err := sender.DM(b.Context(), agent, client.Text("warm"))
		return err == nil
	})
	if _, err := wait(); err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := raw.NextMsg(0); err != nil {
			break // drained the warm-up copies
		}
	}
	var viaWait, viaRaw time.Duration
	b.ResetTimer()
	for b.Loop() {
		done := make(chan time.Time, 1)
		go func() {
			res, err := wait()
			if err != nil || res.IsError {
				b.Errorf("cotal_wait: %v %+v", err, res)
			}
			done <- time.Now()
		}()
		t0 := time.Now()
		if _, err := sender.DM(b.Context(), agent, client.Text("ping")); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.NextMsg(10 * time.Second); err != nil {
			b.Fatal(err)
		}
		viaRaw += time.Since(t0)
		select {
		case t1 := <-done:
			viaWait += t1.Sub(t0)
		case <-time.After(10 * time.Second):
			b.Fatal("cotal_wait did not return")
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaRaw.Microseconds())/n, "raw-µs/dm")
	b.ReportMetric(float64(viaWait.Microseconds())/n, "wait-µs/dm")
	b.ReportMetric(viaWait.Seconds()/viaRaw.Seconds(), "wait-vs-raw")
}
