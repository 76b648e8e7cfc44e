// Package version implements `cotal version`: the CLI's version, the commit and date it was
// built from, and the Go toolchain, read from the binary's build information.
package version

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// unknown stands for a field the build did not record.
const unknown = "unknown"

// Info is what `cotal version --json` prints.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

// The commit and build date a release build stamps with -ldflags (scripts/release:
// -X .../internal/cli/version.stampedCommit=<sha>): set only by the linker, never at run
// time. Empty defers to the VCS stamp the Go toolchain records.
var (
	stampedCommit string
	stampedDate   string
)

// Read is the build's Info. stamped is the version set with -ldflags (cli.Version); "dev"
// or "" defer to the module version `go install ...@version` records. A commit and date
// stamped with -ldflags win over the toolchain's VCS stamp.
func Read(stamped string) Info {
	bi, ok := debug.ReadBuildInfo()
	in := Info{Version: orUnknown(stamped), Commit: unknown, Date: unknown, Go: unknown}
	if ok {
		in = FromBuildInfo(stamped, bi)
	}
	return withStamps(in, stampedCommit, stampedDate)
}

// withStamps is in with the commit and date stamped at link time, where they are set.
func withStamps(in Info, commit, date string) Info {
	if commit != "" {
		in.Commit = commit
	}
	if date != "" {
		in.Date = date
	}
	return in
}

// FromBuildInfo is the Info of bi: the version stamped with -ldflags, else the main
// module's version, else "dev"; the commit and date from the VCS stamp, else from a
// pseudo-version (v0.0.0-20260102150405-abcdef123456).
func FromBuildInfo(stamped string, bi *debug.BuildInfo) Info {
	in := Info{Version: stamped, Commit: unknown, Date: unknown, Go: orUnknown(bi.GoVersion)}
	if mv := bi.Main.Version; (in.Version == "" || in.Version == "dev") && mv != "" && mv != "(devel)" {
		in.Version = mv
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if c, d, ok := pseudo(bi.Main.Version); ok {
		in.Commit, in.Date = c, d
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Date = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// pseudo splits a Go pseudo-version into its commit prefix and its UTC commit time.
func pseudo(v string) (commit, date string, ok bool) {
	v = strings.TrimSuffix(v, "+incompatible")
	parts := strings.Split(v, "-")
	if len(parts) < 3 {
		return "", "", false
	}
	rev, stamp := parts[len(parts)-1], parts[len(parts)-2]
	if i := strings.LastIndexByte(stamp, '.'); i >= 0 { // vX.Y.(Z+1)-0.yyyymmddhhmmss-rev
		stamp = stamp[i+1:]
	}
	t, err := time.Parse("20060102150405", stamp)
	if err != nil || len(rev) != 12 {
		return "", "", false
	}
	return rev, t.UTC().Format(time.RFC3339), true
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// Line is the one line `cotal --version` and `cotal version` both start with.
func (in Info) Line() string { return "cotal version " + in.Version }

// Options are the flags of `cotal version`.
type Options struct {
	IO   *iostreams.IOStreams
	Info Info
	JSON bool
}

// NewCmdVersion builds `cotal version`; info is the running binary's (see Read).
func NewCmdVersion(f *cmdutil.Factory, info Info, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Info: info}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show cotal's version, commit, build date and Go version",
		Long: `Show the version of this cotal, the commit and date it was built from, and the Go
toolchain that built it, as recorded in the binary (go install ...@version records them).
A field the build did not record reads "unknown". The first line is what cotal --version
prints.`,
		Example: `  cotal version          # version, commit, date, Go
  cotal version --json   # the same as one JSON document`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runVersion(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runVersion(opts *Options) error {
	in := opts.Info
	if opts.JSON {
		return cmdutil.WriteJSON(opts.IO.Out, in)
	}
	commit := in.Commit
	if in.Modified {
		commit += " (modified)"
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s\ncommit: %s\ndate:   %s\ngo:     %s\n", in.Line(), commit, in.Date, in.Go)
	return err
}
