// Package history implements `cotal history`: `cotal history clear` purges a space's
// channel history, as `cotal clean history` does.
package history

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/clean"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// NewCmdHistory builds `cotal history` and its subcommand clear.
func NewCmdHistory(f *cmdutil.Factory, runF func(context.Context, string, *clean.Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history <command>",
		Short: "Clear a space's channel history",
		Long: `cotal history clear purges the posts the running mesh keeps for the space's channels:
one channel with --channel, or all; with --dms the space's direct messages too. It is
cotal clean history under another name, with the same dry run, confirmation (--yes
without a terminal) and refusal while agents are connected (--force).`,
		Example: `  cotal history clear --channel general --dry-run
  cotal history clear --channel general --yes`,
	}
	cmd.AddCommand(clean.NewCmdHistory(f, "clear", "cotal history clear", runF))
	return cmdutil.Group(cmd)
}
