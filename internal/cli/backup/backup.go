// Package backup implements `cotal backup create` and `cotal backup inspect`: a backup
// archive of a running mesh's spaces (every stream with its messages and durables'
// positions, the trust chain's public parts, and with --include-auth its seeds), and a
// check of one that lists what it holds. `cotal up --restore` restores one.
package backup

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/backup"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// NewCmdBackup builds `cotal backup` and its subcommands.
func NewCmdBackup(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup <command>",
		Short: "Back up a space's streams, and check a backup",
		Long: `Back up the spaces of the mesh this project runs into one archive file, and check an
archive. A backup holds every stream of a space as JetStream's own snapshot: channel
history, DMs not yet read, hand-offs, task queues, the task board, file claims, ACL and
ledger rows, with each durable consumer at its position; the operator's and the spaces'
account JWTs; and, with --include-auth, the trust chain with its seeds. Presence and the
daemons' leases are left out: a restored space rebuilds them live. Restore one with
` + "`cotal up --restore FILE`" + ` into a project or broker where the space has no data yet.
` + "`cotal down --preserve-state`" + ` cuts one at shutdown into .cotal/backups/.`,
		Example: `  cotal backup create --out team.cotal-backup
  cotal backup create --all --out all.cotal-backup --include-auth
  cotal backup inspect team.cotal-backup
  cotal up --detach --restore team.cotal-backup`,
	}
	cmd.AddCommand(newCmdCreate(f, nil), newCmdInspect(f, nil))
	return cmdutil.Group(cmd)
}

// CreateOptions are the flags of `cotal backup create`.
type CreateOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string
	Now    func() time.Time // nil means time.Now

	Space       string
	All         bool
	Out         string
	IncludeAuth bool
	Force       bool
	JSON        bool
}

func newCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "create --out FILE [--space S | --all] [--include-auth] [--force] [--json]",
		Short: "Write a backup of the running mesh's space (or every space) to a file",
		Long: `Write a backup of one space of the mesh this project runs (the default space, or
--space S), or of every space it serves (--all), to FILE, mode 0600. Each stream is cut with
JetStream's snapshot API, on the embedded broker or an external one (cotal up --external),
while the mesh runs: each stream is consistent in itself; for one cut of a quiet mesh use
cotal down --preserve-state. A space missing one of its streams is refused (run cotal up
--space S first). The archive lists every member with its sha256, so a corrupt or
truncated copy is refused before a restore changes anything.

--include-auth adds the trust chain with its seeds (.cotal/auth): whoever reads the file
can then act as any identity of the mesh, so keep it as carefully as that folder. Without
it, a restore into a project with another trust chain gets the data back under new keys,
and credentials minted before stop working.

An existing FILE is never replaced unless --force; a folder anyone may write to (without
the sticky bit) is refused. The file is written beside FILE and renamed into place.`,
		Example: `  cotal backup create --out team.cotal-backup
  cotal backup create --space review --out review.cotal-backup --json
  cotal backup create --all --include-auth --out /srv/backups/mesh.cotal-backup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return cmdutil.FlagErrorf("--out FILE is required: the archive to write, e.g. --out team.cotal-backup")
			}
			if opts.All && opts.Space != "" {
				return cmdutil.FlagErrorf("--space and --all exclude each other: one space, or every space the mesh serves")
			}
			if opts.Space != "" || cmd.Flags().Changed("space") {
				if err := protocol.CheckSpace(opts.Space); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runCreate(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Out, "out", "o", "", "the archive file to write (mode 0600)")
	fl.StringVar(&opts.Space, "space", "", "the space to back up (default: the mesh's default space)")
	fl.BoolVar(&opts.All, "all", false, "back up every space the mesh serves")
	fl.BoolVar(&opts.IncludeAuth, "include-auth", false, "also the trust chain with its seeds (keep the file as carefully as .cotal/auth)")
	fl.BoolVar(&opts.Force, "force", false, "replace an existing file")
	fl.BoolVar(&opts.JSON, "json", false, "print the archive's manifest as one JSON document")
	return cmd
}

func runCreate(ctx context.Context, opts *CreateOptions) error {
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return cmdutil.FlagErrorf("--out %s: %v", opts.Out, err)
	}
	if err := CheckOut(out, opts.Force); err != nil {
		return err
	}
	wd, err := opts.Getwd()
	if err != nil {
		return fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, opts.Getenv)
	if err != nil {
		return cmdutil.Refuse("a backup", "no .cotal/ found from "+wd+" upward: run it in the project whose mesh to back up", "")
	}
	var spaces []string
	switch {
	case opts.All:
	case opts.Space != "":
		spaces = []string{opts.Space}
	default:
		mesh, err := proj.ReadMesh()
		if err != nil {
			return cmdutil.Refuse("a backup of "+proj.Root, "no mesh runs there; a backup is cut from a running mesh", "cotal up --detach")
		}
		spaces = mesh.Spaces[:1]
	}
	m, err := Cut{Project: proj, Spaces: spaces, Path: out, IncludeAuth: opts.IncludeAuth, Force: opts.Force, Now: opts.Now}.Write(ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, m)
	}
	fmt.Fprintf(opts.IO.Out, "✓ backed up %s to %s (mode 0600)\n", m.Summary(), out)
	printSpaces(opts.IO, m)
	if m.HasChain() {
		fmt.Fprintf(opts.IO.ErrOut, "! %s holds the trust chain's seeds: whoever reads it can act as any identity of the mesh; keep it as carefully as %s\n", out, filepath.Join(proj.Dir(), "auth"))
	}
	return nil
}

// printSpaces lists each space's streams: messages, sequences, consumers.
func printSpaces(io *iostreams.IOStreams, m *backup.Manifest) {
	for _, s := range m.Spaces {
		acct := ""
		if s.Account != "" {
			acct = " (account " + termsafe.Escape(s.Account) + ")"
		}
		fmt.Fprintf(io.Out, "space %s%s\n", s.Name, acct)
		for _, st := range s.Streams {
			seq := "empty"
			if st.Messages > 0 {
				seq = fmt.Sprintf("seq %d-%d", st.FirstSeq, st.LastSeq)
			}
			fmt.Fprintf(io.Out, "  %-28s %s, %s, %s\n", st.Name, cmdutil.Count(st.Messages, "message"), seq, cmdutil.Count(st.Durables, "durable consumer"))
		}
		if len(s.Excluded) > 0 {
			fmt.Fprintf(io.Out, "  left out (rebuilt live): %s\n", strings.Join(s.Excluded, ", "))
		}
	}
}

// InspectOptions are the flags of `cotal backup inspect`.
type InspectOptions struct {
	IO   *iostreams.IOStreams
	File string
	JSON bool
}

func newCmdInspect(f *cmdutil.Factory, runF func(context.Context, *InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "inspect FILE [--json]",
		Short: "Check a backup archive end to end and list what it holds",
		Long: `Read a backup archive from end to end and check it: the manifest, every member's size
and sha256, the manifest's own sha256 and the end of the file. A corrupt or truncated
archive is refused, naming what is wrong, and the exit status is 1. A whole one is
listed: when it was cut, the mesh's mode and operator, each space with its streams
(messages, sequences, consumers) and whether it holds the trust chain's seeds. Read-only:
nothing is connected to or written.`,
		Example: `  cotal backup inspect team.cotal-backup
  cotal backup inspect .cotal/backups/20261203T170000Z.cotal-backup --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runInspect(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the archive's manifest as one JSON document")
	return cmd
}

func runInspect(opts *InspectOptions) error {
	// Stat before the archive is opened: opening a named pipe waits for a writer.
	if err := cmdutil.BackupFile("backup", opts.File).CheckStat(); err != nil {
		return err
	}
	a, err := backup.Open(opts.File)
	if err != nil {
		return cmdutil.Refuse("backup "+opts.File, termsafe.Escape(err.Error()), "")
	}
	m := a.Manifest
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, m)
	}
	fmt.Fprintf(opts.IO.Out, "✓ %s is whole: every member's sha256 matches its manifest\n", opts.File)
	fmt.Fprintf(opts.IO.Out, "%s\n", m.Summary())
	if m.Operator != "" {
		fmt.Fprintf(opts.IO.Out, "mode %s, operator %s\n", m.Mode, termsafe.Escape(m.Operator))
	} else {
		fmt.Fprintf(opts.IO.Out, "mode %s\n", m.Mode)
	}
	printSpaces(opts.IO, m)
	if m.HasChain() {
		fmt.Fprintln(opts.IO.Out, "trust chain: included, with its seeds (cotal up --restore puts it in a project that has none)")
	} else {
		fmt.Fprintln(opts.IO.Out, "trust chain: public parts only (no seeds)")
	}
	return nil
}
