package run

import (
	"os"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/lang"
)

// The worked example in docs/workflows.md is a program the validator accepts.
func TestWorkedExampleValidates(t *testing.T) {
	b, err := os.ReadFile("../../../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```js\n// resolve-issue.cotal.js")
	if !ok {
		t.Fatal("docs/workflows.md has no resolve-issue.cotal.js example")
	}
	src, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the example does not end")
	}
	if _, err := lang.Compile("// resolve-issue.cotal.js" + src); err != nil {
		t.Fatalf("the worked example is refused: %v", err)
	}
}
