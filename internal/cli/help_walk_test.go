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

// TestEveryHelpHasExitCodes runs --help of every command and finds the exit codes in it.
func TestEveryHelpHasExitCodes(t *testing.T) {
	root := testRoot()
	var paths [][]string
	walk(root, func(c *cobra.Command) {
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	for _, p := range paths {
		var out strings.Builder
		root := testRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(p, "--help"))
		if err := root.Execute(); err != nil {
			t.Fatalf("cotal %s --help: %v", strings.Join(p, " "), err)
		}
		if !strings.Contains(out.String(), "Exit codes: 0 done; 1 failed or refused") {
			t.Errorf("cotal %s --help: no exit codes in\n%s", strings.Join(p, " "), out.String())
		}
	}
}
