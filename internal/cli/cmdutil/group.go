package cmdutil

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Group makes cmd a command group (cotal channels, cotal ext, ...): run alone it prints its
// help on stderr and is a usage error (exit 2) naming its subcommands, so a script that
// forgot the subcommand fails; a word that is not one of its subcommands is a usage error
// that lists them. It returns cmd.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return fmt.Errorf("unknown command %q for %q: use %s", args[0], c.CommandPath(), strings.Join(subcommands(c), ", "))
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		c.SetOut(c.ErrOrStderr())
		if err := c.Help(); err != nil {
			return err
		}
		return &HelpShown{Err: fmt.Errorf("%s needs a command: %s", c.CommandPath(), strings.Join(subcommands(c), ", "))}
	}
	return cmd
}

// subcommands are the names of c's available subcommands.
func subcommands(c *cobra.Command) []string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// HelpShown is a usage error printed after the command's help: the CLI prints its one line
// and exits 2, with no pointer to the --help just shown.
type HelpShown struct{ Err error }

func (e *HelpShown) Error() string { return e.Err.Error() }

func (e *HelpShown) Unwrap() error { return e.Err }
