// Package clean implements `cotal clean`: purge a space's history (one channel, every
// channel, and with --dms its direct messages) on the running mesh; delete the stopped
// mesh's JetStream store; or the store and the project's keys. Each has a dry run, asks
// before it deletes (or takes --yes), and history is refused while agents are connected
// unless --force. `cotal history clear` is clean history under another name.
package clean

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal clean` and `cotal history clear`.
type Options struct {
	IO *iostreams.IOStreams
	// Resolve and ConnectOperator reach the mesh (history); only run calls them.
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc
	// Project is the project found from the current folder (store, all); only run calls it.
	Project func() (*workspace.Project, error)

	Command  string // what the person typed, for the lines that repeat it: "cotal clean history"
	Mesh     cmdutil.MeshFlags
	Channel  string // history: only this channel
	DMs      bool   // history: the space's direct messages too
	StoreDir string // store, all: the store folder (default .cotal/nats)
	DryRun   bool
	Yes      bool
	Force    bool
	JSON     bool
}

// NewCmdClean builds `cotal clean` and its subcommands.
func NewCmdClean(f *cmdutil.Factory, runF func(context.Context, string, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clean <command>",
		Short: "Purge a space's history, or delete the stopped mesh's store and keys",
		Long: `Remove what a mesh stored. Every subcommand has --dry-run, which lists what would go
with counts and changes nothing; otherwise it asks on a terminal, and without one it
needs --yes.

  history           purge posts from the channel stream of the running mesh: one channel
                    (--channel) or all; with --dms the space's direct messages too.
                    Refused while agents are connected unless --force.
  store             delete the JetStream store of this project's stopped mesh: every
                    space's streams and buckets. The keys stay, so the next cotal up
                    starts every space empty with the same credentials.
  all               the store and the project's keys and auth state (.cotal/auth): every
                    credential minted here stops working. Personas, cotal.yaml and logs stay.
  restore-fallback  refused: cotal keeps no restore fallback to clean.`,
		Example: `  cotal clean history --channel general --dry-run
  cotal clean history --channel general --yes
  cotal clean history --dms --yes --force    # agents are still connected
  cotal down && cotal clean store --yes`,
	}
	cmd.AddCommand(
		newCmdHistory(f, "history", "cotal clean history", runF),
		newCmdStore(f, runF),
		newCmdAll(f, runF),
		newCmdRestoreFallback(),
	)
	return cmdutil.Group(cmd)
}

// NewCmdHistory builds the history purge as `name` under command (cotal history clear
// uses it too).
func NewCmdHistory(f *cmdutil.Factory, name, command string, runF func(context.Context, string, *Options) error) *cobra.Command {
	return newCmdHistory(f, name, command, runF)
}

func newOptions(f *cmdutil.Factory, command string) *Options {
	return &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, Command: command,
		Project: func() (*workspace.Project, error) {
			wd, err := f.Getwd()
			if err != nil {
				return nil, err
			}
			return workspace.FindProject(wd, f.Getenv)
		}}
}

func newCmdHistory(f *cmdutil.Factory, name, command string, runF func(context.Context, string, *Options) error) *cobra.Command {
	opts := newOptions(f, command)
	cmd := &cobra.Command{
		Use:   name + " [--channel C] [--dms] [--dry-run | --yes] [--force]",
		Short: "Purge a space's channel history (and with --dms its direct messages)",
		Long: `Purge the posts the running mesh keeps in the space's channel stream (CHAT_<space>):
every channel, or with --channel only the posts of that channel (its subjects; no other
channel loses anything, and a sub-channel such as team.backend is a channel of its own).
With --dms the space's direct-message stream (DM_<space>) is purged too, pending DMs
included. Copies the delivery daemon holds for durable members who are away are
deliveries in flight, not history, and stay. The channel registry (descriptions, replay
settings) stays.

--dry-run lists each channel (and the DMs) with the number of messages that would go.
Without it, cotal asks on a terminal; without a terminal it needs --yes. While agents
are connected (presence shows them online) it refuses unless --force: they would lose
history they may read again. On a user-auth or authenticated space it acts with the
project's own keys; a remote mesh is its operator's to clean.`,
		Example: fmt.Sprintf(`  %[1]s --channel general --dry-run
  %[1]s --channel general --yes
  %[1]s --dms --yes --force
  %[1]s --space review --json --yes`, command),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.checkCommon(); err != nil {
				return err
			}
			if cmd.Flags().Changed("channel") {
				if err := checkChannel(opts.Channel); err != nil {
					return cmdutil.FlagErrorf("--channel: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), "history", opts)
			}
			return runHistory(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&opts.Channel, "channel", "", "purge only this channel's posts (default: every channel)")
	fl.BoolVar(&opts.DMs, "dms", false, "purge the space's direct messages too, pending ones included")
	fl.BoolVar(&opts.Force, "force", false, "purge even while agents are connected")
	opts.commonFlags(cmd)
	return cmd
}

func newCmdStore(f *cmdutil.Factory, runF func(context.Context, string, *Options) error) *cobra.Command {
	opts := newOptions(f, "cotal clean store")
	cmd := &cobra.Command{
		Use:   "store [--store-dir DIR] [--dry-run | --yes]",
		Short: "Delete the JetStream store of this project's stopped mesh",
		Long: `Delete the JetStream store of this project's embedded broker (.cotal/nats, or the
folder cotal up --store-dir named): every space's streams (channel history, DMs, task
queues, delivery copies) and buckets (presence, channel registry, members, ACLs, leases,
claims, the task board). The project's keys (.cotal/auth) stay: the next cotal up
provisions every space again, empty, and credentials minted before still connect.

The mesh must be stopped (cotal down): a running broker holds its store open. --dry-run
lists the streams and the size that would go. Without it, cotal asks on a terminal;
without a terminal it needs --yes. A folder that holds no JetStream store is refused.`,
		Example: `  cotal down && cotal clean store --dry-run
  cotal clean store --yes
  cotal clean store --store-dir /var/lib/cotal/nats --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.checkCommon(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), "store", opts)
			}
			return runStore(cmd.Context(), opts, false)
		},
	}
	cmd.Flags().StringVar(&opts.StoreDir, "store-dir", "", "the store folder cotal up --store-dir named (default: .cotal/nats)")
	opts.commonFlags(cmd)
	return cmd
}

func newCmdAll(f *cmdutil.Factory, runF func(context.Context, string, *Options) error) *cobra.Command {
	opts := newOptions(f, "cotal clean all")
	cmd := &cobra.Command{
		Use:   "all [--store-dir DIR] [--dry-run | --yes]",
		Short: "Delete the stopped mesh's store and the project's keys",
		Long: `Everything cotal clean store deletes, and the project's keys and auth state
(.cotal/auth): the operator and space account keys, the minted creds files, the user-auth
pins, ledgers and bearer keys. Every credential minted from this project stops working;
the next cotal up makes a new trust chain. Personas (.cotal/agents), cotal.yaml and the
logs stay.

The mesh must be stopped (cotal down). --dry-run lists what would go. Without it, cotal
asks on a terminal; without a terminal it needs --yes.`,
		Example: `  cotal down && cotal clean all --dry-run
  cotal clean all --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.checkCommon(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), "all", opts)
			}
			return runStore(cmd.Context(), opts, true)
		},
	}
	cmd.Flags().StringVar(&opts.StoreDir, "store-dir", "", "the store folder cotal up --store-dir named (default: .cotal/nats)")
	opts.commonFlags(cmd)
	return cmd
}

// newCmdRestoreFallback refuses the reference's restore-fallback cleaning: a cotal
// restore is refused before it changes anything, so it never leaves a fallback copy.
func newCmdRestoreFallback() *cobra.Command {
	return &cobra.Command{
		Use:   "restore-fallback",
		Short: "Refused: cotal keeps no restore fallback to clean",
		Long: `The reference keeps the store a failed restore replaced as a fallback copy, and this
command deletes it. cotal keeps none: cotal up --restore refuses a live space and a
corrupt or truncated backup before it changes anything, so there is nothing to clean.
To discard a stopped mesh's store, use cotal clean store.`,
		Example: `  cotal clean restore-fallback    # refused: it says what to use instead
  cotal clean store --dry-run     # the stopped mesh's store, listed`,
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "--help" || a == "-h" {
					return cmd.Help()
				}
			}
			return cmdutil.RefuseUsage("cotal clean restore-fallback",
				"cotal keeps no restore fallback: a restore is refused before it changes anything, so there is nothing to clean; to discard a stopped mesh's store use cotal clean store",
				"cotal clean store --dry-run")
		},
	}
}

func (o *Options) commonFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&o.DryRun, "dry-run", false, "list what would be deleted, with counts, and change nothing")
	fl.BoolVarP(&o.Yes, "yes", "y", false, "delete without asking (needed without a terminal)")
	fl.BoolVar(&o.JSON, "json", false, "print one JSON document")
}

func (o *Options) checkCommon() error {
	if o.DryRun && o.Yes {
		return cmdutil.FlagErrorf("--dry-run and --yes exclude each other: --dry-run changes nothing")
	}
	return nil
}

// checkChannel accepts one literal channel name: no wildcard, so exactly one channel's
// posts are purged.
func checkChannel(ch string) error {
	if err := protocol.CheckChannelPattern(ch); err != nil {
		return err
	}
	for _, seg := range strings.Split(ch, ".") {
		if seg == "*" || seg == ">" {
			return fmt.Errorf("channel %q: name one channel, without wildcards", ch)
		}
	}
	return nil
}

// errCancelled is a purge the person declined at the prompt.
var errCancelled = errors.New("cancelled: nothing was deleted")

// confirm asks the person at the terminal to confirm what; without a terminal it refuses
// unless --yes was given.
func (o *Options) confirm(what string) error {
	if o.Yes {
		return nil
	}
	if !o.IO.IsStdinTTY() {
		return cmdutil.RefuseUsage(o.Command+" without --yes",
			"there is no terminal to ask for confirmation; add --yes to delete "+what+", or --dry-run to see it first",
			o.again(" --dry-run"))
	}
	fmt.Fprintf(o.IO.ErrOut, "Delete %s? This cannot be undone. [y/N] ", what)
	line, err := bufio.NewReader(io.LimitReader(o.IO.In, 256)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errCancelled
}
