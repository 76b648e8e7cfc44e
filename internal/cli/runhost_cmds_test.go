package cli_test

import (
	"regexp"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdWaitOut runs a cotal command again and again until its stdout matches REGEXP (a
// hang guard of 90 s, not a timing assertion), leaving that run's stdout and stderr for
// the lines that follow:
//
//	waitout REGEXP cotal ARGS...
func cmdWaitOut(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || args[1] != "cotal" {
		ts.Fatalf("usage: waitout REGEXP cotal ARGS...")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := ts.Exec(args[1], args[2:]...)
		out := ts.ReadFile("stdout")
		if err == nil && re.MatchString(out) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("cotal %v: stdout does not match %q after 90s (err %v); it is:\n%s\nstderr:\n%s", args[2:], args[0], err, out, ts.ReadFile("stderr"))
		}
		time.Sleep(200 * time.Millisecond) // re-ask interval
	}
}
