package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// walk calls fn on cmd and every available command under it.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			walk(c, fn)
		}
	}
}

// testRoot is the command tree with test streams and no environment.
func testRoot() *cobra.Command {
	ios, _, _, _ := iostreams.Test()
	root := NewCmdRoot(&cmdutil.Factory{IO: ios, Getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// TestEveryCommandHasExample walks the command tree: every command's --help shows at least
// one example, and one example line runs that very command.
func TestEveryCommandHasExample(t *testing.T) {
	n := 0
	walk(testRoot(), func(c *cobra.Command) {
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no example in --help", c.CommandPath())
			return
		}
		if !strings.Contains(c.Example, c.CommandPath()) {
			t.Errorf("%s: no example runs %q:\n%s", c.CommandPath(), c.CommandPath(), c.Example)
		}
	})
	if n < 40 {
		t.Fatalf("walked %d commands; the tree is bigger than that", n)
	}
}
