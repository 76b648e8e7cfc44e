package a2agw

// SetAfterSend makes g call f once a task's message went out and before the send's state
// is recorded: a test holds it there until the agent's answer has been recorded.
func SetAfterSend(g *Gateway, f func(taskID string)) { g.afterSend = f }
