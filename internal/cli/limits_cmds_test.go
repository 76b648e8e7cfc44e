package cli_test

import (
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdRepeat sets $VAR to TEXT repeated N times: a message too long to write in a script.
//
//	repeat VAR N TEXT
func cmdRepeat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: repeat VAR N TEXT")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		ts.Fatalf("repeat: N %q: want a whole number", args[1])
	}
	ts.Setenv(args[0], strings.Repeat(args[2], n))
}
