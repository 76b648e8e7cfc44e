// Package doctor implements `cotal doctor`: it checks what a person running a mesh can get
// wrong (versions, the trust chain, credentials, pidfiles and leases, daemons, streams that
// drifted, the port, the clock, the IdP), one line per check, and with --fix repairs what
// is safe to repair.
package doctor

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// Statuses of a check.
const (
	StatusOK    = "ok"    // nothing wrong
	StatusWarn  = "warn"  // worth knowing; nothing is broken by it yet
	StatusFail  = "fail"  // something is wrong: doctor exits 1
	StatusFixed = "fixed" // it was wrong and --fix repaired it
)

// Check is one line of the report.
type Check struct {
	Check   string `json:"check"`             // the kind of check: version, trust, creds, pidfile, daemon, streams, lease, port, clock, idp
	Subject string `json:"subject,omitempty"` // what it looked at: a file, a space, a stream
	Status  string `json:"status"`            // ok, warn, fail or fixed
	Message string `json:"message"`
	// Next is the command that fixes it, when one does: `cotal doctor --fix` for what
	// --fix repairs.
	Next string `json:"next,omitempty"`
	// Fixable is true when --fix repairs it (a file mode, a stale pidfile, a pidfile the
	// live daemon lost, a stream or bucket that drifted without loss).
	Fixable bool `json:"fixable,omitempty"`

	fix func() (string, error) // repairs it and says what it did; nil unless Fixable
}

// Report is what `cotal doctor --json` prints.
type Report struct {
	Project string  `json:"project,omitempty"` // the project folder, "" outside one
	Server  string  `json:"server,omitempty"`  // the project's mesh, when it has one
	Subset  string  `json:"subset"`            // "all" or "auth"
	Healthy bool    `json:"healthy"`           // no check failed
	OK      int     `json:"ok"`
	Warn    int     `json:"warn"`
	Fail    int     `json:"fail"`
	Fixed   int     `json:"fixed"`
	Checks  []Check `json:"checks"`
}

// Options are the flags of `cotal doctor`.
type Options struct {
	IO              *iostreams.IOStreams
	Getwd           func() (string, error)
	Getenv          func(string) string
	Executable      func() (string, error)
	ConnectOperator cmdutil.ConnectAsFunc
	LoginDir        func() (string, error) // where cotal login keeps IdP sessions
	Version         string                 // this binary's version
	Now             func() time.Time       // nil means time.Now
	HTTP            *http.Client           // for the IdP; nil means one with a 5 s timeout

	Auth  bool   // `doctor auth`: the credential subset
	Space string // only this space; "" means every space of the mesh
	Fix   bool
	JSON  bool
}

// NewCmdDoctor builds `cotal doctor`.
func NewCmdDoctor(f *cmdutil.Factory, version string, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, Executable: f.Executable,
		ConnectOperator: f.ConnectOperator, LoginDir: f.LoginDir, Version: version}
	cmd := &cobra.Command{
		Use:   "doctor [auth] [--fix] [--json] [--space S]",
		Short: "Check the project and its mesh for what is wrong, and repair what is safe",
		Long: `Check what can go wrong with a project and the mesh it runs, one line per check:

  version   this cotal, the project's cotal.yaml, the binary the running mesh was started from
  trust     the operator and space keys in .cotal/auth: readable, consistent, folder mode 0700
  creds     every creds and key file under .cotal/: mode 0600, not expired (a warning a day before)
  pidfile   every .cotal/*.pid: its process still runs
  daemon    the daemons the mesh should run (delivery, auth service, manager) run, or are held down
  streams   every stream and bucket of each space is as cotal up provisions it
  lease     the delivery lease and this host's manager lease: not held by a process gone from here
  port      the mesh's port answers, and is not taken by something else while the mesh is down
  clock     this machine's clock agrees with the broker's (an authenticated mesh)
  idp       a user-auth space's IdP answers
  login     this machine's session at that IdP (cotal login) has not expired

A line starts with ✓ (ok), ! (a warning) or ✗ (wrong), and a wrong one names the command
that fixes it. The last line sums up. doctor exits 1 when a check failed, 0 otherwise
(warnings too).

--fix repairs only what is safe and says what it changed: a creds or key file readable by
others (chmod 600), a trust folder open to others (chmod 700), a pidfile whose process is
gone (removed), the pidfile of a delivery daemon that still runs and holds the lease
(written again), and a stream or bucket that drifted when cotal up's repair loses nothing
(created again, or updated in place). It never restarts a daemon or the mesh, never
re-mints a credential and never changes a conflicting stream: for those it prints what to run.

doctor auth runs the credential checks only: trust, creds, the auth service, the IdP and
the login session.`,
		Example: `  cotal doctor
  cotal doctor --fix
  cotal doctor auth
  cotal doctor --space review --json`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"auth"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if args[0] != "auth" {
					return cmdutil.FlagErrorf("unknown check group %q: the only one is auth (cotal doctor auth)", args[0])
				}
				opts.Auth = true
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDoctor(cmd.Context(), opts)
		},
	}
	cmdutil.SpaceVar(cmd.Flags(), &opts.Space, "check only this space (default: every space of the project's mesh)")
	cmd.Flags().BoolVar(&opts.Fix, "fix", false, "repair what is safe to repair, and say what changed")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runDoctor(ctx context.Context, opts *Options) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	d, err := newDoctor(opts)
	if err != nil {
		return err
	}
	d.run(ctx)
	rep := d.report()
	if opts.JSON {
		if err := cmdutil.WriteJSON(opts.IO.Out, rep); err != nil {
			return err
		}
	} else {
		printReport(opts.IO, rep)
	}
	if !rep.Healthy {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

// report sums up the checks, applying the fixes when asked.
func (d *doctor) report() Report {
	rep := Report{Subset: "all", Checks: []Check{}}
	if d.opts.Auth {
		rep.Subset = "auth"
	}
	if d.proj != nil {
		rep.Project = d.proj.Root
	}
	if d.mesh != nil {
		rep.Server = d.mesh.Server
	}
	for _, c := range d.checks {
		switch c.Status {
		case StatusOK:
			rep.OK++
		case StatusWarn:
			rep.Warn++
		case StatusFail:
			rep.Fail++
		case StatusFixed:
			rep.Fixed++
		}
		rep.Checks = append(rep.Checks, c)
	}
	rep.Healthy = rep.Fail == 0
	return rep
}

// printReport writes one line per check and the summary; a failed or warned check that a
// command fixes is followed by its next line.
func printReport(ios *iostreams.IOStreams, rep Report) {
	out := ios.Out
	for _, c := range rep.Checks {
		mark := map[string]string{StatusOK: "✓", StatusWarn: "!", StatusFail: "✗", StatusFixed: "✓"}[c.Status]
		subject := ""
		if c.Subject != "" {
			subject = " " + cmdutil.OneLine(c.Subject)
		}
		msg := cmdutil.OneLine(c.Message)
		if c.Status == StatusFixed {
			msg = "fixed: " + msg
		}
		fmt.Fprintf(out, "%s %s%s: %s\n", mark, c.Check, subject, msg)
		if c.Next != "" && (c.Status == StatusFail || c.Status == StatusWarn) {
			fmt.Fprintf(out, "next: run `%s`\n", c.Next)
		}
	}
	switch {
	case rep.Fail == 0 && rep.Warn == 0:
		fmt.Fprintf(out, "healthy: %s passed%s\n", cmdutil.Count(rep.OK+rep.Fixed, "check"), fixedNote(rep.Fixed))
	case rep.Fail == 0:
		fmt.Fprintf(out, "healthy, with %s: %d ok%s\n", cmdutil.Count(rep.Warn, "warning"), rep.OK, fixedNote(rep.Fixed))
	default:
		fmt.Fprintf(out, "unhealthy: %d failed, %s, %d ok%s\n", rep.Fail, cmdutil.Count(rep.Warn, "warning"), rep.OK, fixedNote(rep.Fixed))
	}
}

func fixedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d fixed", n)
}
