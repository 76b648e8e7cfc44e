// Package update implements `cotal update`: refuse an unsafe config ancestor, repair the
// operator config and seed personas, verify or reinstall operator extensions, and with
// --self --from replace the cotal binary.
package update

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/extension"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	cliext "github.com/cotal-ai/cotal/internal/cli/ext"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/selfupdate"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal update`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Getwd       func() (string, error)
	Getenv      func(string) string
	ConfigHome  func() (string, error)
	MachineHome func() (string, error)
	Executable  func() (string, error)
	Logger      *slog.Logger // nil means discard

	Self       bool   // --self: replace the cotal binary
	From       string // --from: the new binary, or a release archive holding it
	Checksums  string // --checksums: the release's SHA256SUMS, which must list --from
	Reinstall  bool   // --reinstall: reinstall every extension
	CLIVersion string // the running CLI's version
}

// NewCmdUpdate builds `cotal update`.
func NewCmdUpdate(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, MachineHome: f.MachineHome,
		Executable: f.Executable, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "update [--reinstall] [--self --from <binary|archive> [--checksums SHA256SUMS]]",
		Short: "Repair the operator config and personas, verify or reinstall extensions, replace cotal",
		Long: `Bring this machine's cotal state up to date. First, before any write, update refuses when a
folder at or above the operator config ($XDG_CONFIG_HOME/cotal), the machine home
($COTAL_HOME) or the project's .cotal is a symlink, belongs to another user, or is group- or
world-writable without the sticky bit: it names the folder and the fix.

Then it repairs the operator config (a corrupt config.json is moved aside and reseeded) and
the seed personas (a persona whose managed marker you removed is yours and kept), and runs
the extension pass: a first-party extension at cotal's version, with the spec update
installs, whose file is on disk with its locked SHA-256 is verified in place; any other
first-party extension, and any extension whose file is missing or changed, is reinstalled
in a child process after a line that says why. Third-party extensions that are intact are
kept as they are.

--self --from <binary> checks that <binary> runs (--version), replaces this cotal with it
atomically, and runs the new binary's update. --from may name a release archive instead
(cotal_<version>_<os>_<arch>.tar.gz or .zip, as scripts/release builds them) with
--checksums naming the release's SHA256SUMS: the archive's SHA-256 is checked against its
line before anything is unpacked, and a mismatch (or an archive the file does not list)
is refused with nothing changed. --checksums also checks a bare binary.`,
		Example: `  cotal update
  cotal update --reinstall
  cotal update --self --from ./dist/cotal
  cotal update --self --from cotal_v1.2.0_linux_amd64.tar.gz --checksums SHA256SUMS`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.From != "" && !opts.Self {
				return cmdutil.FlagErrorf("--from names the binary for --self; add --self")
			}
			if opts.Self && opts.From == "" {
				return cmdutil.FlagErrorf("--self needs --from <binary>: this build has no release channel to download from")
			}
			if opts.Checksums != "" && opts.From == "" {
				return cmdutil.FlagErrorf("--checksums checks the file --from names; add --self --from <archive>")
			}
			if selfupdate.IsArchive(opts.From) && opts.Checksums == "" {
				return cmdutil.FlagErrorf("--from %s is a release archive: add --checksums <SHA256SUMS> from the same release, so it is checked before it replaces cotal", opts.From)
			}
			if opts.Self && opts.Reinstall {
				return cmdutil.FlagErrorf("--reinstall and --self go in two runs: the new binary runs update after --self")
			}
			opts.CLIVersion = cmd.Root().Version
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runUpdate(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Self, "self", false, "replace the cotal binary (needs --from)")
	cmd.Flags().StringVar(&opts.From, "from", "", "the new cotal binary, or a release archive, for --self")
	cmd.Flags().StringVar(&opts.Checksums, "checksums", "", "the release's SHA256SUMS: --from must match its line")
	cmd.Flags().BoolVar(&opts.Reinstall, "reinstall", false, "reinstall every extension, even verified ones")
	return cmd
}

func runUpdate(ctx context.Context, opts *Options) error {
	u, err := updater(opts)
	if err != nil {
		return err
	}
	if opts.Self {
		return runSelf(ctx, opts, u)
	}
	res, err := u.Run(ctx)
	if err != nil {
		if errors.Is(err, selfupdate.ErrReinstall) {
			return fmt.Errorf("%w: run `cotal ext list` to see each extension's state", err)
		}
		return cliext.Unsafe("update", err)
	}
	fmt.Fprintf(opts.IO.Out, "update: %d verified, %d kept, %d reinstalled\n", res.Verified, res.Kept, res.Reinstalled)
	return nil
}

// updater assembles the update from the folders the options name.
func updater(opts *Options) (*selfupdate.Updater, error) {
	cfgHome, err := opts.ConfigHome()
	if err != nil {
		return nil, err
	}
	home, err := opts.MachineHome()
	if err != nil {
		return nil, err
	}
	wd, err := opts.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, opts.Getenv)
	if errors.Is(err, workspace.ErrNoProject) {
		proj, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	exe, err := opts.Executable()
	if err != nil {
		return nil, fmt.Errorf("cotal binary: %w", err)
	}
	config := filepath.Join(cfgHome, "cotal")
	u := &selfupdate.Updater{
		ConfigDir:    config,
		ConfigRoot:   selfupdate.Root{Label: "operator config", Path: config, Env: "XDG_CONFIG_HOME", Base: cfgHome},
		HomeDir:      home,
		Check:        selfupdate.AncestorCheck{UID: os.Geteuid()},
		Prefix:       &extension.Prefix{Dir: filepath.Join(config, "extensions"), Logger: opts.Logger},
		CLIVersion:   opts.CLIVersion,
		ReinstallAll: opts.Reinstall,
		Reinstall:    selfupdate.Child{Exe: exe}.Reinstall,
		Say:          func(n selfupdate.Note) { fmt.Fprintln(opts.IO.Out, n.String()) },
	}
	if proj != nil {
		u.ProjectDir = proj.Dir()
	}
	if opts.Self {
		u.ExtraRoots = []selfupdate.Root{{Label: "cotal binary", Path: filepath.Dir(exe)}}
	}
	return u, nil
}

// runSelf checks every ancestor, replaces the binary and runs the new binary's update.
func runSelf(ctx context.Context, opts *Options, u *selfupdate.Updater) error {
	if err := u.Check.CheckAncestors(u.Roots()...); err != nil {
		return cliext.Unsafe("update --self", err)
	}
	target, err := opts.Executable()
	if err != nil {
		return fmt.Errorf("cotal binary: %w", err)
	}
	if real, err := filepath.EvalSymlinks(target); err == nil {
		target = real
	}
	from, cleanup, err := releaseBinary(opts, target)
	if err != nil {
		return err
	}
	defer cleanup()
	version, err := selfupdate.ReplaceSelf(ctx, from, target)
	if errors.Is(err, selfupdate.ErrBadBinary) {
		return cmdutil.Refuse("update --self", err.Error()+"; "+target+" is unchanged", opts.From+" --version")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ replaced %s with %s (%s)\n", target, opts.From, version)
	cmd := exec.CommandContext(ctx, target, "update")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.IO.In, opts.IO.Out, opts.IO.ErrOut
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return &cmdutil.ExitError{Code: max(exitErr.ExitCode(), 1)}
		}
		return fmt.Errorf("run the new binary's update: %w", err)
	}
	return nil
}

// releaseBinary is the binary --from names, checked against --checksums when given: the
// file itself, or the one unpacked from a release archive. With --checksums the file is
// first copied into a private temp folder and the copy is checked and used, so the file
// cannot change between the check and its use; a mismatch is refused before anything is
// unpacked or replaced. cleanup removes the temp folder.
func releaseBinary(opts *Options, target string) (path string, cleanup func(), err error) {
	none := func() {}
	from := opts.From
	if opts.Checksums == "" && !selfupdate.IsArchive(from) {
		return from, none, nil
	}
	dir, err := os.MkdirTemp("", "cotal-update-")
	if err != nil {
		return "", none, fmt.Errorf("update --self: temp folder: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) } // a temp folder: nothing to report
	defer func() {
		if err != nil {
			cleanup()
			cleanup = none
		}
	}()
	if opts.Checksums != "" {
		if from, err = selfupdate.CopyInto(opts.From, dir); err != nil {
			return "", none, err
		}
		if _, err := selfupdate.VerifyChecksum(from, opts.Checksums); err != nil {
			if errors.Is(err, selfupdate.ErrChecksum) {
				err = errors.New(strings.ReplaceAll(err.Error(), from, opts.From)) // name the user's file, not the copy
				return "", none, cmdutil.Refuse("update --self", err.Error()+"; "+target+" is unchanged",
					"sha256sum "+opts.From+"  # and compare with the release's published SHA256SUMS")
			}
			return "", none, err
		}
		fmt.Fprintf(opts.IO.ErrOut, "✓ %s matches %s\n", opts.From, opts.Checksums)
	}
	if !selfupdate.IsArchive(from) {
		return from, cleanup, nil
	}
	bin, err := selfupdate.ExtractBinary(from, dir)
	if err != nil {
		why := strings.ReplaceAll(err.Error(), from, opts.From) + "; " + target + " is unchanged"
		if strings.HasSuffix(strings.ToLower(opts.From), ".zip") {
			return "", none, cmdutil.Refuse("update --self", why, "unzip -l "+opts.From)
		}
		return "", none, cmdutil.Refuse("update --self", why, "tar -tzf "+opts.From)
	}
	return bin, cleanup, nil
}
