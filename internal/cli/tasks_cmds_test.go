package cli_test

import (
	"encoding/json"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdStdoutVar is `stdoutvar VAR FIELD`: sets VAR to the string FIELD of the JSON object
// the last command printed (a --json document), such as a new task's id.
func cmdStdoutVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: stdoutvar VAR FIELD")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &doc); err != nil {
		ts.Fatalf("stdout is not a JSON object: %v", err)
	}
	v, ok := doc[args[1]].(string)
	if !ok {
		ts.Fatalf("stdout has no string field %q", args[1])
	}
	ts.Setenv(args[0], v)
}
