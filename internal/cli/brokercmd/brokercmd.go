// Package brokercmd implements `cotal broker`: the broker's trust chain carried between
// machines (export, import), so the embedded brokers of several machines form one cluster,
// and the configuration of a stock nats-server that serves the project (config).
package brokercmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// NewCmdBroker builds `cotal broker`, the parent of the broker's commands.
func NewCmdBroker(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "broker <command>",
		Short: "Carry the broker's trust chain between machines; configure a stock nats-server",
		Long: `The broker's trust chain (.cotal/auth/: the operator, the system account, one account per
space, identities and user-auth keys) is what every node of a cluster must share. Export
it on the first machine and import it on the others before their first cotal up.
cotal broker config writes the configuration of a stock nats-server that trusts the chain,
for cotal up --external.`,
		Example: `  cotal broker export chain.tar                          # on the first machine
  cotal broker import chain.tar                          # on each other machine, before cotal up
  cotal broker config --out nats.conf                    # a stock nats-server for cotal up --external`,
	}
	cmd.AddCommand(NewCmdExport(f, nil), NewCmdImport(f, nil), NewCmdConfig(f, nil))
	return cmdutil.Group(cmd)
}

// ExportOptions are the arguments and flags of `cotal broker export`.
type ExportOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string

	Out    string   // archive file; "-" is stdout
	Force  bool     // replace Out when it exists
	Spaces []string // spaces whose accounts are made (when missing) before the export

	UserAuth bool   // make each of Spaces a user-auth space before the export
	IdP      string // with UserAuth: the IdP's base URL, or with ClientID the OIDC issuer URL
	ClientID string // with UserAuth: the OIDC client id; "" pins the reference's way
}

// NewCmdExport builds `cotal broker export`.
func NewCmdExport(f *cmdutil.Factory, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "export <file.tar | -> [--space S]... [--user-auth --idp URL [--client-id ID]] [--force]",
		Short: "Write the project's trust chain to a tar archive",
		Long: `Write the trust chain of this project's broker (.cotal/auth/) to a tar archive (0600), or to
stdout with - (a pipe or a file: a terminal is refused). A project without a chain gets one
first (the project is the nearest .cotal/ above the current folder; outside any project the
export is refused, and mkdir -m 700 .cotal makes the current folder one): the first node of
a cluster makes the chain the others import. --space S makes the account of space S first, when the chain has none:
every node of a cluster must hold the account of each space it serves. Creds minted on this machine and the broker's resolver folder are left out.
A user-auth space's auth-service keys (the IdP pin, the bearer issuer key, the owner
secret, the callout account) are part of the chain and go with it, so the auth service of
every node signs and checks the same bearers. --user-auth --idp URL [--client-id ID]
makes each --space a user-auth space first (as cotal up --user-auth does), for a cluster
whose nodes have not started yet.
The archive holds every secret of the mesh: move it over a channel you trust and delete it
once imported. A file that exists is refused unless --force; its folder must exist.`,
		Example: `  cotal broker export --space team trust.tar
  cotal broker export - | ssh b 'cd team && cotal broker import -'
  cotal broker export --space team --user-auth --idp https://idp.example.com/realms/team --client-id cotal trust.tar`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out = args[0]
			for _, sp := range opts.Spaces {
				if err := protocol.CheckSpace(sp); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if opts.UserAuth && len(opts.Spaces) == 0 {
				return cmdutil.FlagErrorf("--user-auth needs --space S: the space whose people sign in with the IdP")
			}
			if err := cmdutil.CheckIdPFlags(cmd, opts.UserAuth, opts.IdP, opts.ClientID); err != nil {
				return err
			}
			if opts.Force && opts.Out == "-" {
				return cmdutil.FlagErrorf("--force replaces a file: it does not go with -")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runExport(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace the file when it exists")
	cmd.Flags().StringArrayVar(&opts.Spaces, "space", nil, "make the account of this space first when the chain has none (repeatable)")
	cmd.Flags().BoolVar(&opts.UserAuth, "user-auth", false, "make each --space a user-auth space first (needs --idp)")
	cmd.Flags().StringVar(&opts.IdP, "idp", "", "with --user-auth: the IdP's base URL, or with --client-id its OIDC issuer URL")
	cmd.Flags().StringVar(&opts.ClientID, "client-id", "", "with --user-auth: the OIDC client id the IdP's ID tokens name")
	return cmd
}

func runExport(opts *ExportOptions) error {
	if opts.Out == "-" && opts.IO.IsStdoutTTY() {
		return cmdutil.RefuseUsage("cotal broker export - to a terminal",
			"the archive holds every secret of the mesh and is binary; send it to a file or a pipe (nothing was written)",
			"cotal broker export trust.tar")
	}
	if opts.Out != "-" {
		if err := checkOutDir("cotal broker export", opts.Out); err != nil {
			return err
		}
		if _, err := os.Lstat(opts.Out); err == nil && !opts.Force {
			return cmdutil.Refuse("to write "+opts.Out, "the file exists and may be another archive",
				"cotal broker export "+opts.Out+" --force")
		}
	}
	proj, err := findProject(opts.Getwd, opts.Getenv, "cotal broker export")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(proj.AuthDir(), "broker.json")); errors.Is(err, os.ErrNotExist) {
		// The first node of a cluster makes the chain the others import.
		if _, err := trust.Open(proj.AuthDir()); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "created a new trust chain in %s\n", proj.AuthDir())
	}
	if len(opts.Spaces) > 0 {
		chain, err := trust.Open(proj.AuthDir())
		if err != nil {
			return err
		}
		for _, sp := range opts.Spaces {
			if _, err := chain.Space(sp); err != nil {
				return err
			}
			if !opts.UserAuth {
				continue
			}
			pin, err := authsvc.Enable(chain, sp, opts.IdP, opts.ClientID)
			if err != nil {
				return cmdutil.Refuse("--user-auth --idp "+opts.IdP, err.Error(),
					"cotal broker export "+opts.Out+" --space "+sp)
			}
			fmt.Fprintf(opts.IO.ErrOut, "user auth: space %s admits people of %s\n", sp, pin.Issuer)
		}
	}
	var buf bytes.Buffer
	n, err := trust.Export(proj.AuthDir(), &buf)
	if err != nil {
		return err
	}
	if opts.Out == "-" {
		_, err := io.Copy(opts.IO.Out, &buf)
		return err
	}
	if err := atomicfile.WriteFile(opts.Out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", opts.Out, err)
	}
	fmt.Fprintf(opts.IO.Out, "✓ trust chain of %s (%s) written to %s\n", proj.Root, cmdutil.Count(n, "file"), opts.Out)
	fmt.Fprintf(opts.IO.ErrOut, "it holds every secret of the mesh: copy it to the other nodes, run `cotal broker import %s` there, then delete it\n", filepath.Base(opts.Out))
	return nil
}

// ImportOptions are the arguments and flags of `cotal broker import`.
type ImportOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string

	In    string // archive file; "-" is stdin
	Force bool   // replace another chain (moved aside, never deleted)
}

// NewCmdImport builds `cotal broker import`.
func NewCmdImport(f *cmdutil.Factory, runF func(context.Context, *ImportOptions) error) *cobra.Command {
	opts := &ImportOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "import <file.tar | -> [--force]",
		Short: "Make this project's trust chain the one in an archive",
		Long: `Unpack a trust chain written by cotal broker export into this project's .cotal/auth/ (the
project is the nearest .cotal/ above the current folder, or a new one here). The archive is
checked before anything changes: anything cotal broker export never writes is refused. A
project that holds another chain is refused unless
--force, which moves the old chain aside to .cotal/auth.replaced.<n> (never deleted); a
project that already holds this chain is left as it is. Stop the mesh first: a running
broker keeps the chain it started with.`,
		Example: `  cotal broker import trust.tar
  cotal broker import trust.tar --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runImport(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace another chain (it is moved aside to .cotal/auth.replaced.<n>)")
	return cmd
}

func runImport(opts *ImportOptions) error {
	var in io.Reader = opts.IO.In
	if opts.In != "-" {
		if fi, err := os.Stat(opts.In); err == nil && !fi.Mode().IsRegular() {
			return cmdutil.RefuseUsage("cotal broker import "+opts.In, "it is not a regular file: name the archive cotal broker export wrote, or - for stdin (nothing was changed)", "")
		}
		f, err := os.Open(opts.In)
		if err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
		defer f.Close()
		in = f
	}
	wd, err := opts.Getwd()
	if err != nil {
		return fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, opts.Getenv)
	if err != nil {
		// A new node's project: here, but never in the machine's own cotal folder.
		if err := cmdutil.CheckProjectFolder(wd, opts.Getenv, "cotal broker import", "cotal broker import "+cmdutil.ShellQuote(opts.In)); err != nil {
			return err
		}
		if proj, err = workspace.Open(wd); err != nil {
			return err
		}
	}
	if cmdutil.MeshRunning(proj) {
		return cmdutil.Refuse("to import a trust chain into "+proj.Root,
			"the mesh of this project runs and keeps the chain it started with", "cotal down")
	}
	res, err := trust.Import(in, proj.AuthDir(), opts.Force)
	if errors.Is(err, trust.ErrChainExists) {
		return cmdutil.Refuse("to import "+opts.In+" into "+proj.AuthDir(),
			"the project holds another trust chain, and every credential minted from it would stop working",
			"cotal broker import "+opts.In+" --force")
	}
	if err != nil {
		return err
	}
	switch {
	case res.Unchanged:
		fmt.Fprintf(opts.IO.Out, "✓ %s already holds this trust chain; nothing changed\n", proj.AuthDir())
	case res.Replaced != "":
		fmt.Fprintf(opts.IO.Out, "✓ trust chain imported into %s (%s); the one it replaced is in %s\n", proj.AuthDir(), cmdutil.Count(res.Files, "file"), res.Replaced)
	default:
		fmt.Fprintf(opts.IO.Out, "✓ trust chain imported into %s (%s)\n", proj.AuthDir(), cmdutil.Count(res.Files, "file"))
	}
	return nil
}
