// Package down implements `cotal down`: stop the broker that `cotal up` started.
package down

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal down`.
type Options struct {
	IO      *iostreams.IOStreams
	Getwd   func() (string, error)
	Getenv  func(string) string
	Timeout time.Duration
}

// NewCmdDown builds `cotal down`.
func NewCmdDown(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the mesh this project started",
		Long: `Stop the broker that ` + "`cotal up`" + ` started for this project (found by walking up from the
current folder to .cotal/). The pidfile is checked against the process start time, so a
reused pid is never signalled. Stored messages stay in the store for the next ` + "`cotal up`" + `.`,
		Example: `  cotal down`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDown(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 15*time.Second, "how long to wait for the broker to stop")
	return cmd
}

func runDown(ctx context.Context, opts *Options) error {
	wd, proj, err := cmdutil.FindProject(opts.Getwd, opts.Getenv)
	if wd == "" {
		return err
	}
	if err != nil {
		fmt.Fprintf(opts.IO.Out, "nothing to stop: no .cotal/ found from %s upward\n", wd)
		return nil
	}
	rec, err := workspace.ReadPidfile(proj.PidFile())
	if errors.Is(err, workspace.ErrNoPidfile) {
		fmt.Fprintf(opts.IO.Out, "nothing to stop: no mesh runs for %s\n", proj.Root)
		return nil
	}
	if err != nil {
		return cmdutil.Refuse("stopping the mesh", err.Error()+"; it cannot be told apart from another process",
			"rm "+proj.PidFile()+"*  # after checking no cotal broker runs for "+proj.Root)
	}
	alive, err := rec.Alive()
	if err != nil {
		return fmt.Errorf("check pid %d: %w", rec.PID, err)
	}
	if !alive {
		if err := clearRecords(proj); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "nothing to stop: the mesh of %s had already exited (pid %d); cleared its records\n", proj.Root, rec.PID)
		return nil
	}
	if err := syscall.Kill(rec.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop pid %d: %w", rec.PID, err)
	}
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the mesh (pid %d) did not stop within %s; see %s", rec.PID, opts.Timeout, proj.LogFile())
		case <-tick.C:
		}
		if alive, err := rec.Alive(); err != nil {
			return fmt.Errorf("check pid %d: %w", rec.PID, err)
		} else if !alive {
			break
		}
	}
	if err := clearRecords(proj); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ stopped the mesh of %s (pid %d)\n", proj.Root, rec.PID)
	return nil
}

// clearRecords removes the records of a mesh that no longer runs.
func clearRecords(proj *workspace.Project) error {
	if err := workspace.RemovePidfile(proj.PidFile()); err != nil {
		return err
	}
	return proj.RemoveMesh()
}
