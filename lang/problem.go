package lang

import (
	"fmt"
	"strings"
)

// Problem is one refusal (or warning) the validator or the evaluator raised,
// in the coordinates of the author's source.
type Problem struct {
	Code    string `json:"code"`              // the catalog code, Lnnnn
	Title   string `json:"title"`             // the catalog title
	Message string `json:"message"`           // what was wrong, naming the construct
	Fix     string `json:"fix,omitempty"`     // the edit that repairs it
	Line    int    `json:"line,omitempty"`    // 1-based line in the program
	Column  int    `json:"column,omitempty"`  // 1-based column (in characters)
	Callee  string `json:"callee,omitempty"`  // the primitive's signature, when blamed on a call
	Warning bool   `json:"warning,omitempty"` // returned but never blocking
}

// String renders the problem on one line: "3:7 L1025 Forbidden syntax: loose equality: ...".
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d ", p.Line, p.Column)
	}
	b.WriteString(p.Code)
	if p.Title != "" {
		b.WriteString(" " + p.Title)
	}
	if p.Message != "" {
		b.WriteString(": " + p.Message)
	}
	if p.Fix != "" {
		b.WriteString(" (fix: " + p.Fix + ")")
	}
	return b.String()
}

// RefusedError is the error Compile returns for a program the validator refuses.
type RefusedError struct {
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "program refused: " + strings.Join(parts, "; ")
}

// Codes returns the distinct codes of the refusal, in order of first appearance.
func (e *RefusedError) Codes() []string { return codesOf(e.Problems) }

func codesOf(ps []Problem) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		if !seen[p.Code] {
			seen[p.Code] = true
			out = append(out, p.Code)
		}
	}
	return out
}

// Titles is the error catalog (LANG Appendix A): code to title.
var Titles = map[string]string{
	"L1001": "Forbidden syntax: class", "L1002": "Forbidden syntax: this", "L1003": "Forbidden syntax: var",
	"L1004": "Forbidden syntax: for...in", "L1005": "Forbidden syntax: generator",
	"L1006": "Forbidden syntax: eval or Function", "L1007": "Forbidden syntax: regular expression literal",
	"L1008": "Newline hazard", "L1009": "Unbraced branch", "L1010": "switch case does not terminate",
	"L1011": "Computed property name", "L1012": "Array elision", "L1013": "Forbidden syntax: with",
	"L1014": "Forbidden syntax: symbol", "L1015": "Forbidden syntax: accessor",
	"L1016": "Forbidden syntax: instanceof", "L1017": "Forbidden syntax: label",
	"L1018": "Forbidden syntax: tagged template literal", "L1019": "Forbidden syntax: new",
	"L1020": "Forbidden syntax: import or export", "L1021": "Forbidden syntax: delete",
	"L1022": "Forbidden syntax: do...while", "L1023": "Forbidden syntax: await outside an async function",
	"L1024": "return outside a function", "L1025": "Forbidden syntax: loose equality",
	"L1026": "Forbidden syntax: comma operator", "L1027": "Forbidden syntax: void",
	"L1028": "Forbidden property name", "L1029": "Syntax outside the language", "L1030": "Forbidden literal: bigint",
	"L2001": "Unknown identifier", "L2002": "Shadows a builtin or a primitive",
	"L2003": "Assignment to a const binding", "L2004": "Use before declaration",
	"L2011": "The Promise API is not available", "L2012": "Host global is not available",
	"L2013": "An async call is not awaited", "L2031": "Mutation of a frozen value",
	"L2032": "Write from a concurrent branch to something declared outside it",
	"L3011": "Unknown option key", "L3012": "Missing required step name", "L3013": "Step name is not a literal",
	"L3014": "Malformed step name", "L3021": "fanOut has no stable key",
	"L3022": "Two agents share a worktree concurrently", "L3023": "Array-form parallel holds named effects",
	"L3024": "fanOut branch keys are not unique", "L3025": "Branch key contains a reserved step-key character",
	"L3041": "Value cannot cross an effect boundary", "L3042": "Function passed as effect data",
	"L3043": "notify fact is not a bounded decision record", "L3044": "to without onExpiry: \"escalate\"",
	"L3045": "waitUntil probe is not a function", "L3046": "waitUntil needs a cadence and a deadline",
	"L3047": "waitUntil cadence is zero, or does not divide its deadline usefully",
	"L3048": "spawn placement is not an endpoint and instanceId pair",
	"L4001": "Permit exhausted", "L4002": "Agent down", "L4003": "Turn deadline elapsed",
	"L4004": "Handoff across worktrees", "L4005": "Handoff to an agent outside the run",
	"L4006": "ask never produced a conforming record", "L4007": "Checkpoint expired",
	"L4008": "Concurrent worktree write", "L4009": "Run effect ceiling reached",
	"L4010": "Field access on null or undefined", "L4011": "Call of a value that is not a function",
	"L4012": "Assertion failed", "L4013": "Step budget exhausted", "L4014": "Unknown member",
	"L4015": "Not iterable", "L4016": "Builtin failed", "L4017": "Invalid array length",
	"L4018": "No implicit conversion", "L4019": "Array write past the end", "L4020": "A method is not a value",
	"L4021": "A callable then is not a record member", "L4022": "Unreadable ask schema",
	"L4023": "waitUntil deadline elapsed", "L4024": "waitUntil probe or predicate answered the wrong shape",
	"L4025": "Host did not schedule the run", "L4026": "Pause plane did not answer before the client deadline",
	"L5001": "Run divergence", "L5010": "Journal append rejected", "L5012": "Run released before the next effect",
}
