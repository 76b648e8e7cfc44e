package agentmcp

import "github.com/modelcontextprotocol/go-sdk/mcp"

// addTeamTools registers the tools a team coordinates with: cotal_wait blocks until a
// message arrives, cotal_ack settles messages explicitly, and cotal_search,
// cotal_message and cotal_thread read bounded history.
func (s *Server) addTeamTools() {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_wait", Title: "Cotal: wait for a message", InputSchema: waitSchema(),
		Description: "Block until a message for you arrives (or one already waits), then return it as cotal_inbox does; or return empty after timeout seconds (at most 300). kinds, channels and from narrow what counts; the rest stays in your inbox. Use it instead of calling cotal_inbox in a loop."},
		s.wait)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_ack", Title: "Cotal: acknowledge messages", InputSchema: ackSchema(),
		Description: "Settle messages by id so they are never delivered again, and set how this session acknowledges: mode deliver (default) = what cotal_inbox or cotal_wait returns is settled once you have it; mode read = it stays unsettled until you cotal_ack its id, and comes back next session if you never do. Also settles a message cotal_inbox peek showed, without taking it."},
		s.ackTool)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_search", Title: "Cotal: search messages", Annotations: ro, InputSchema: searchSchema(),
		Description: "Find messages by words in the recent history of your channels (or one channel) and in the messages of this session. Returns one summary line per match, newest first, a page at a time; cotal_message {id} returns one whole."},
		s.search)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_message", Title: "Cotal: one message whole", Annotations: ro, InputSchema: idSchema(),
		Description: "Return one message whole by its id (from cotal_inbox, cotal_search or cotal_thread)."}, s.message)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_thread", Title: "Cotal: a thread in order", Annotations: ro, InputSchema: idSchema(),
		Description: "Return the thread a message belongs to, oldest first: the message replied to and every reply you may read, one summary line each."},
		s.thread)
}
