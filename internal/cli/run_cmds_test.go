package cli_test

import (
	"regexp"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdRunProc reaches into a process `proc start` started:
//
//	runproc var NAME VAR REGEXP   set VAR to REGEXP's first group in its stdout so far
//	runproc kill NAME             SIGKILL it (no cleanup runs) and wait for it to die
func cmdRunProc(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: runproc var NAME VAR REGEXP | runproc kill NAME")
	}
	ps := ts.Value(procsKey{}).(*procs)
	ps.mu.Lock()
	p := ps.m[args[1]]
	ps.mu.Unlock()
	if p == nil {
		ts.Fatalf("no process %q", args[1])
	}
	switch {
	case args[0] == "var" && len(args) == 4:
		m := regexp.MustCompile(args[3]).FindStringSubmatch(p.out.String())
		if len(m) < 2 {
			ts.Fatalf("%s printed no %q:\n%s", args[1], args[3], p.out.String())
		}
		ts.Setenv(args[2], m[1])
	case args[0] == "kill" && len(args) == 2:
		if err := p.cmd.Process.Kill(); err != nil {
			ts.Fatalf("kill %s: %v", args[1], err)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			ts.Fatalf("%s did not die", args[1])
		}
		ps.mu.Lock()
		delete(ps.m, args[1])
		ps.mu.Unlock()
	default:
		ts.Fatalf("usage: runproc var NAME VAR REGEXP | runproc kill NAME")
	}
}
