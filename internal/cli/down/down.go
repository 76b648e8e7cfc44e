// Package down implements `cotal down`: stop the broker that `cotal up` started.
package down

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
	"github.com/spf13/cobra"
)

// Options are the flags of `cotal down`.
type Options struct {
	IO      *iostreams.IOStreams
	Getwd   func() (string, error)
	Getenv  func(string) string
	Timeout time.Duration

	Component  string // "" (everything), "delivery", "auth", "manager", "web" or "a2a"
	Space      string // with a component: only this space's daemon
	WithAgents bool   // stop the manager even while its agents run (they end with it)
	// PreserveState cuts a backup of every space into .cotal/backups/ after the daemons
	// stop and before the broker does (preserve.go).
	PreserveState bool
	Now           func() time.Time // the cut's time; nil means time.Now
}

// NewCmdDown builds `cotal down`.
func NewCmdDown(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "down [delivery | auth | manager [--space S] | web | a2a]",
		Short: "Stop the mesh this project started",
		Long: `Stop the broker that ` + "`cotal up`" + ` started for this project (found by walking up from the
current folder to .cotal/). The pidfile is checked against the process start time, so a
reused pid is never signalled. Stored messages stay in the store for the next ` + "`cotal up`" + `.
The auth services and delivery daemons stop first, releasing what they hold.
` + "`cotal down delivery`" + ` stops only the delivery daemons and ` + "`cotal down auth`" + ` only the auth
services of user-auth spaces (of one space with --space); the broker keeps serving and holds
a daemon stopped this way down until ` + "`cotal up`" + ` on the running mesh starts it again.
Agents the manager runs (cotal spawn --detach) end with it, so while any runs, cotal down
and cotal down manager refuse and name them: stop them with cotal stop, or pass
--with-agents.
` + "`cotal down web`" + ` stops only the dashboard ` + "`cotal web --detach`" + ` started, and ` + "`cotal down a2a`" + `
only the A2A gateway ` + "`cotal a2a --detach`" + ` started; a bare ` + "`cotal down`" + ` stops them too.
--preserve-state backs up every space (as cotal backup create --all) once the daemons have
stopped and before the broker does, into .cotal/backups/<UTC time>.cotal-backup (0600), and
says where; if the cut fails, the broker keeps running. Restore it with cotal up --restore.`,
		Example: `  cotal down
  cotal down --with-agents     # also ends the agents the manager runs
  cotal down --preserve-state  # first back up every space into .cotal/backups/
  cotal down delivery --space team
  cotal down auth --space team
  cotal down web
  cotal down a2a`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Timeout <= 0 {
				return cmdutil.FlagErrorf("--timeout %s: want a positive duration, e.g. 30s", opts.Timeout)
			}
			if len(args) == 1 && (args[0] == "web" || args[0] == "a2a") {
				if opts.Space != "" {
					return cmdutil.FlagErrorf("--space goes with delivery or auth; cotal down %s stops the project's one %s", args[0], sideTitle(args[0]))
				}
				opts.Component = args[0]
			} else if len(args) == 1 {
				if _, ok := workspace.DaemonNamed(args[0]); !ok {
					return cmdutil.FlagErrorf("unknown component %q: cotal down stops everything, or only delivery, auth, manager, web or a2a", args[0])
				}
				opts.Component = args[0]
				if opts.Space != "" || cmd.Flags().Changed("space") {
					if err := protocol.CheckSpace(opts.Space); err != nil {
						return cmdutil.FlagErrorf("--space: %v", err)
					}
				}
			} else if opts.Space != "" {
				return cmdutil.FlagErrorf("--space goes with a component: cotal down delivery --space %s", opts.Space)
			}
			if opts.PreserveState && opts.Component != "" {
				return cmdutil.FlagErrorf("--preserve-state cuts the whole mesh as it stops: use it with a bare cotal down")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDown(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 15*time.Second, "how long to wait for each process to stop (positive)")
	cmd.Flags().StringVar(&opts.Space, "space", "", "with a component: only this space's daemon")
	cmd.Flags().BoolVar(&opts.PreserveState, "preserve-state", false, "first back up every space into .cotal/backups/ (after the daemons stop, before the broker)")
	cmd.Flags().BoolVar(&opts.WithAgents, "with-agents", false, "stop the manager even while agents it runs are alive (they end with it)")
	return cmd
}

func runDown(ctx context.Context, opts *Options) error {
	wd, err := opts.Getwd()
	if err != nil {
		return fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, opts.Getenv)
	if err != nil {
		fmt.Fprintf(opts.IO.Out, "nothing to stop: no .cotal/ found from %s upward\n", wd)
		return nil
	}
	if title := sideTitle(opts.Component); title != "" {
		stopped, err := stopSide(ctx, opts, proj, opts.Component)
		if err == nil && !stopped {
			fmt.Fprintf(opts.IO.Out, "nothing to stop: no %s runs for %s\n", title, proj.Root)
		}
		return err
	}
	if opts.Component == "" {
		for _, c := range []string{"web", "a2a"} { // the dashboard and the gateway first: they use the mesh
			if _, err := stopSide(ctx, opts, proj, c); err != nil {
				return err
			}
		}
	}
	if (opts.Component == "" || opts.Component == "manager") && !opts.WithAgents {
		if err := refuseWithAgents(proj); err != nil {
			return err
		}
	}
	if c, ok := workspace.DaemonNamed(opts.Component); ok {
		stopped, err := stopDaemons(ctx, opts, proj, c, false)
		if err != nil {
			return err
		}
		if stopped == 0 && opts.Space != "" {
			fmt.Fprintf(opts.IO.Out, "nothing to stop: no %s runs for space %s of %s (cotal status lists the spaces it serves)\n", c.Title, opts.Space, proj.Root)
		} else if stopped == 0 {
			fmt.Fprintf(opts.IO.Out, "nothing to stop: no %s runs for %s\n", c.Title, proj.Root)
		}
		return nil
	}
	if err := stopMesh(ctx, opts, proj); err != nil {
		// The mesh may still run: its daemons stay held down as after cotal down <daemon>,
		// and their marks must say cotal up starts them again.
		unmarkMesh(proj)
		return err
	}
	return nil
}

// stopMesh is a bare cotal down once the dashboard and the gateway stopped: the daemons
// (held down first), the state backup with --preserve-state, then the broker.
func stopMesh(ctx context.Context, opts *Options, proj *workspace.Project) error {
	for _, name := range []string{"manager", "auth", "delivery"} { // the manager first: it stops its seats; auth next: it asks the delivery daemon
		c, _ := workspace.DaemonNamed(name)
		if _, err := stopDaemons(ctx, opts, proj, c, true); errors.Is(err, errCannotHold) {
			// The broker process stops its daemons itself (releasing what they hold) as
			// it stops, so nothing is lost by leaving them to it.
			fmt.Fprintf(opts.IO.ErrOut, "! %v; the broker stops its daemons as it stops\n", err)
			break
		} else if err != nil {
			return err
		}
	}
	if opts.PreserveState {
		if err := preserve(ctx, opts, proj); err != nil {
			return err
		}
	}
	rec, err := workspace.ReadPidfile(proj.PidFile())
	if errors.Is(err, workspace.ErrNoPidfile) {
		fmt.Fprintf(opts.IO.Out, "nothing to stop: no mesh runs for %s\n", proj.Root)
		return nil
	}
	if err != nil {
		return cmdutil.Refuse("a stop of the mesh", err.Error()+"; it cannot be told apart from another process",
			"rm "+cmdutil.ShellQuote(proj.PidFile())+"*  # after checking no cotal broker runs for "+proj.Root)
	}
	alive, err := rec.Alive()
	if err != nil {
		return fmt.Errorf("check pid %d: %w", rec.PID, err)
	}
	if !alive {
		if err := clearRecords(proj); err != nil {
			fmt.Fprintf(opts.IO.Out, "nothing to stop: the mesh of %s had already exited (pid %d)\n", proj.Root, rec.PID)
			warnRecords(opts, proj, err)
			return nil
		}
		fmt.Fprintf(opts.IO.Out, "nothing to stop: the mesh of %s had already exited (pid %d); cleared its records\n", proj.Root, rec.PID)
		return nil
	}
	if err := stop(ctx, rec, opts.Timeout); err != nil {
		return fmt.Errorf("the mesh (pid %d): %w; see %s", rec.PID, err, proj.LogFile())
	}
	fmt.Fprintf(opts.IO.Out, "✓ stopped the mesh of %s (pid %d)\n", proj.Root, rec.PID)
	if err := clearRecords(proj); err != nil {
		warnRecords(opts, proj, err) // the mesh is down all the same
	}
	return nil
}

// unmarkMesh turns the held marks a bare cotal down left back into those of a daemon
// held down alone (workspace.Hold), for a mesh that did not stop.
func unmarkMesh(proj *workspace.Project) {
	for _, name := range []string{"manager", "auth", "delivery"} {
		c, _ := workspace.DaemonNamed(name)
		// The stopped daemons' pidfiles are gone; their marks are beside where they were.
		marks, _ := filepath.Glob(filepath.Join(proj.Dir(), strings.TrimSuffix(c.Glob, ".pid")+".held"))
		for _, m := range marks {
			if pid := strings.TrimSuffix(m, ".held") + ".pid"; workspace.HeldForMesh(pid) {
				_ = workspace.Hold(pid, false) // best effort: the stop's own error is what is reported
			}
		}
	}
}

// refuseWithAgents refuses to stop a manager while agents it runs are alive: they would
// end with it, and nobody asked for that.
func refuseWithAgents(proj *workspace.Project) error {
	names, err := manager.RunningSeats(proj)
	if err != nil || len(names) == 0 {
		return err
	}
	return cmdutil.Refuse("a stop of the manager of "+proj.Root,
		fmt.Sprintf("%s it runs (%s) would end with it", cmdutil.Count(len(names), "agent"), strings.Join(names, ", ")),
		"cotal stop --name "+names[0]+"  # or: cotal down --with-agents")
}

// warnRecords says that the records of a mesh that no longer runs could not be removed, and
// that this is harmless: they name a process that has exited, which cotal up and cotal
// down both recognise.
func warnRecords(opts *Options, proj *workspace.Project, err error) {
	fmt.Fprintf(opts.IO.ErrOut, "! its records in %s stay (%v); they name a process that has exited, so the next cotal up starts afresh\n", proj.Dir(), err)
	fmt.Fprintf(opts.IO.ErrOut, "  to remove them, make %s writable (chmod u+w %s) and run cotal down again\n", proj.Dir(), proj.Dir())
}

// errCannotHold reports that cotal down could not leave the mark that holds a daemon down.
var errCannotHold = errors.New("cannot hold the daemon down")

// clearRecords removes the records of a mesh that no longer runs, and the marks that held
// its daemons down.
func clearRecords(proj *workspace.Project) error {
	if err := workspace.RemovePidfile(proj.PidFile()); err != nil {
		return err
	}
	if err := proj.ReleaseHeld(); err != nil {
		return err
	}
	return proj.RemoveMesh()
}

// stop asks the recorded process to end (launch.Terminate: SIGTERM; killed on Windows) and waits until it is gone.
func stop(ctx context.Context, rec workspace.Record, timeout time.Duration) error {
	if err := launch.Terminate(rec.PID); err != nil {
		return fmt.Errorf("stop pid %d: %w", rec.PID, err)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("did not stop within %s", timeout)
		case <-tick.C:
		}
		alive, err := rec.Alive()
		if err != nil {
			return fmt.Errorf("check pid %d: %w", rec.PID, err)
		}
		if !alive {
			return nil
		}
	}
}

// stopDaemons stops the daemons of component c of the project (of opts.Space only, when
// set) and says how many it stopped; all is a bare cotal down, which stops the whole mesh
// next (its held marks say so). A mark it cannot write (a read-only .cotal/) stops it
// with an error wrapping errCannotHold before that daemon is signalled.
func stopDaemons(ctx context.Context, opts *Options, proj *workspace.Project, c workspace.Daemon, all bool) (int, error) {
	pattern := filepath.Join(proj.Dir(), c.Glob)
	if opts.Space != "" {
		pattern = c.PidFile(proj, opts.Space)
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		return 0, fmt.Errorf("find %ss: %w", c.Title, err)
	}
	n := 0
	for _, f := range files {
		rec, err := workspace.ReadPidfile(f)
		if err != nil {
			continue // gone between glob and read, or an identity file
		}
		if alive, err := rec.Alive(); err != nil || !alive {
			if err := workspace.RemovePidfile(f); err != nil && !all {
				return n, err
			}
			continue // a stale record the whole-mesh stop may leave
		}
		// Held first, so the broker process does not restart what exits here.
		if err := workspace.Hold(f, all); err != nil {
			return n, fmt.Errorf("%w: the %s (pid %d): %w", errCannotHold, c.Title, rec.PID, err)
		}
		if err := stop(ctx, rec, opts.Timeout); err != nil {
			return n, fmt.Errorf("%s (pid %d, %s): %w", c.Title, rec.PID, f, err)
		}
		n++
		fmt.Fprintf(opts.IO.Out, "✓ stopped the %s (pid %d)\n", c.Title, rec.PID)
	}
	return n, nil
}

// sideTitle names the processes beside the mesh that cotal down stops first: the
// dashboard (cotal web --detach) and the A2A gateway (cotal a2a --detach).
// "" for any other component.
func sideTitle(component string) string {
	switch component {
	case "web":
		return "dashboard"
	case "a2a":
		return "A2A gateway"
	}
	return ""
}

// sidePidFile is the pidfile of such a process (internal/cli/web.PidFileName,
// internal/cli/a2a.PidPath), relative to the project's .cotal/.
func sidePidFile(proj *workspace.Project, component string) string {
	if component == "a2a" {
		return filepath.Join(proj.Dir(), "a2a", "serve.pid")
	}
	return filepath.Join(proj.Dir(), "web.pid")
}

// stopSide stops the project's detached dashboard or gateway (component "web" or "a2a"),
// if one runs, and says whether it did. A stale pidfile is removed.
func stopSide(ctx context.Context, opts *Options, proj *workspace.Project, component string) (bool, error) {
	title := sideTitle(component)
	path := sidePidFile(proj, component)
	rec, err := workspace.ReadPidfile(path)
	if errors.Is(err, workspace.ErrNoPidfile) {
		return false, nil
	}
	if err != nil {
		return false, cmdutil.Refuse("a stop of the "+title, err.Error()+"; it cannot be told apart from another process",
			"rm "+cmdutil.ShellQuote(path)+"*  # after checking no cotal "+component+" runs for "+proj.Root)
	}
	if alive, err := rec.Alive(); err != nil || !alive {
		return false, workspace.RemovePidfile(path)
	}
	if err := stop(ctx, rec, opts.Timeout); err != nil {
		return false, fmt.Errorf("the %s (pid %d): %w", title, rec.PID, err)
	}
	fmt.Fprintf(opts.IO.Out, "✓ stopped the %s (pid %d)\n", title, rec.PID)
	return true, workspace.RemovePidfile(path)
}
