package cmdutil

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Group makes cmd a command group (cotal channels, cotal ext, ...): run alone it prints its
// help on stdout and exits 0; a word that is not one of its subcommands is a usage error
// that lists them. It returns cmd.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q: use %s", args[0], c.CommandPath(), strings.Join(names, ", "))
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	return cmd
}
