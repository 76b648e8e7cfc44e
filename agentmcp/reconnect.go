package agentmcp

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reconnectWait bounds how long cotal_reconnect waits for the new connection.
const reconnectWait = 15 * time.Second

type reconnectOut struct {
	State      string `json:"state"`
	Server     string `json:"server,omitempty"`
	Reconnects uint64 `json:"reconnects"`
}

// reconnect drops the connection to the space and waits until the client has dialled
// again (its reconnect count moved and it is connected). Subscriptions and consumers are
// restored by the client; held messages stay held.
func (s *Server) reconnect(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, reconnectOut, error) {
	nc := s.Endpoint.Conn()
	if nc.IsClosed() {
		return nil, reconnectOut{State: "stopped"}, errClosing
	}
	before := nc.Stats().Reconnects
	if err := nc.ForceReconnect(); err != nil {
		return nil, reconnectOut{}, fmt.Errorf("reconnect: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st := nc.Stats()
		switch {
		case nc.IsClosed():
			return nil, reconnectOut{State: "stopped", Reconnects: st.Reconnects}, errClosing
		case st.Reconnects > before && nc.IsConnected():
			out := reconnectOut{State: "ready", Server: nc.ConnectedUrlRedacted(), Reconnects: st.Reconnects}
			return text("Reconnected ✓ to %s.", out.Server), out, nil
		}
		select {
		case <-ctx.Done():
			return nil, reconnectOut{State: "connecting", Reconnects: st.Reconnects},
				fmt.Errorf("reconnect failed within %s: still retrying automatically (cotal_connection_status shows when it is back)", reconnectWait)
		case <-tick.C:
		}
	}
}
