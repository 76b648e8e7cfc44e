package cli_test

import (
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/workspace"
)

// cmdPidGone asserts, at once (no waiting), that the process named by the pidfile FILE
// has ended (a zombie nobody reaped counts as ended); negated, that it still runs.
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: pidgone FILE")
	}
	pid := pidIn(ts, args[0])
	if pid <= 0 {
		ts.Fatalf("pidgone: no pid in %s", args[0])
	}
	_, err := workspace.ProcessRecord(pid)
	switch gone := err != nil; {
	case gone && neg:
		ts.Fatalf("process %d (%s) has ended: %v", pid, args[0], err)
	case !gone && !neg:
		ts.Fatalf("process %d (%s) still runs", pid, args[0])
	}
}
