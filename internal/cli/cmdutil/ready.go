package cmdutil

import "github.com/cotal-ai/cotal/internal/launch"

// ReadyFDEnv names an inherited pipe on which a background process (the detached broker,
// a supervised daemon) tells the parent waiting for it that it serves: one line, "ready ...".
const ReadyFDEnv = launch.ReadyEnv

// SignalReady writes "ready <what>" to the pipe ReadyFDEnv names and closes it. Without the
// variable it does nothing: the process was started by hand.
func SignalReady(getenv func(string) string, what string) error {
	return launch.SignalReady(getenv, what)
}
