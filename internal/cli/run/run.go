// Package run implements `cotal run`: workflow runs, Cotal Lang programs whose every
// effect is journaled before it is performed, so a run survives the process driving it.
// The space's manager drives a run (start and resume ask it), or the CLI process does
// (--local); the verbs that read and answer a run (ps, journal, answer) work on any run
// in the space's records, whoever drove it.
package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// MaxProgramSize bounds a program file.
const MaxProgramSize = 1 << 20

// Options are the flags every verb shares.
type Options struct {
	IO              *iostreams.IOStreams
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc

	Mesh     cmdutil.MeshFlags
	Local    bool
	JSON     bool
	File     string
	Value    string
	Artifact string
	By       string

	AdmitRead    string
	AdmitPublish string
	Reason       string
	// Commit-side migration overrides, parsed so migrate refuses them by name.
	Adopt, Release   string
	DiscardApprovals bool
}

// NewCmdRun builds `cotal run` and its verbs.
func NewCmdRun(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run <command>",
		Short: "Start, resume, list, inspect and answer workflow runs (Cotal Lang programs)",
		Long: `A workflow run is a Cotal Lang program (*.cotal.js) whose every effect is journaled on
the mesh before it is performed (the stream WFJ_<space>, the records bucket
cotal_records_<space>), so a run survives the process that drives it: resume replays
the journal, recorded effects answer their recorded results, and the first unrecorded
effect is performed live.

The space's manager (cotal up starts one) drives the runs start and resume hand it, and
takes back every running run when it restarts; it performs every effect, the seat ones
(spawn, turn, ask, wait) included. --local drives a run in the CLI process instead:
sleep, checkpoint, notify, log and the parallel, race and fanOut scopes; a local run
reaching a seat effect is released, held (exit 2). A checkpoint waiting for a person is
answered with answer, or from cotal web (NEEDS YOU) and cotal console (r); amend files a
later answer beside an accepted one, revoke stops a run from being resumed, and migrate
checks whether an edited program could take a run over. docs/workflows.md says more.`,
		Example: `  cotal run start --file resolve-issue.cotal.js
  cotal run ps
  cotal run journal run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f
  cotal run answer run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:issue#0 --value '{"issue":42}'
  cotal run resume run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local
  cotal run amend run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f /checkpoint:issue#0 --value '{"issue":43}'
  cotal run revoke run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local --by alice --reason "wrong repo"
  cotal run migrate run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local --file resolve-issue.cotal.js`,
	}
	cmd.AddCommand(newCmdStart(f), newCmdResume(f), newCmdPs(f), newCmdJournal(f), newCmdAnswer(f),
		newCmdAmend(f), newCmdRevoke(f), newCmdMigrate(f))
	return cmd
}

func newOptions(f *cmdutil.Factory) *Options {
	return &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator}
}

// connect resolves the mesh and connects as the project's own identity, which alone
// writes a run's journal and records.
func (o *Options) connect(ctx context.Context) (jetstream.JetStream, string, func(), error) {
	target, err := o.Resolve(o.Mesh)
	if err != nil {
		return nil, "", nil, err
	}
	ep, err := o.ConnectOperator(ctx, target, trust.ProfileProvisioner)
	if err != nil {
		return nil, "", nil, err
	}
	return ep.JetStream(), target.Space, func() { _ = ep.Close() }, nil
}

func newCmdStart(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "start --file PROGRAM [--local]",
		Short: "Start a run of a program, driven by the space's manager or in this process",
		Long: `Validate the program and hand it to the space's manager (cotal up starts one), which
mints the run id (run-<32 hex>), drives the run and keeps driving it across its own
restarts; start prints the id and returns (--json: {"runId", "space", "host"}). With no
manager serving the space it is refused: start one with cotal up, or use --local.
A refused program prints each problem with its code (L1xxx-L3xxx) and changes nothing.

--local drives the run in this process until it ends instead. Exit 0 when it completes,
1 when it fails, 2 when it is released (held at an effect this process cannot perform,
or stopped): resume it later with cotal run resume. Before it is driven the run is
admitted: an admission record (cotal_admission_<space>) names the channel ceiling it
runs under, --admit-read and --admit-publish (comma-separated channels, or none, the
default: a local run performs no channel effect). The manager admits a run it hosts
itself, with no channel, before it drives it.`,
		Example: `  cotal run start --file resolve-issue.cotal.js
  cotal run start --file resolve-issue.cotal.js --local
  cotal run start --file triage.cotal.js --local --admit-read general,issues --admit-publish none`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.File == "" {
				return cmdutil.FlagErrorf("give the program with --file")
			}
			if err := o.hostedFlags(); err != nil {
				return err
			}
			for flag, v := range map[string]string{"--admit-read": o.AdmitRead, "--admit-publish": o.AdmitPublish} {
				if _, err := channelList(v); err != nil {
					return cmdutil.FlagErrorf("%s: %v", flag, err)
				}
			}
			return runStart(cmd.Context(), o)
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&o.File, "file", "", "the program, a *.cotal.js file")
	cmd.Flags().BoolVar(&o.Local, "local", false, "drive the run in this process, not on the space's manager")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the hosted run's id as a JSON object (not with --local)")
	cmd.Flags().StringVar(&o.AdmitRead, "admit-read", runstore.AllowNone, "channels the run may read, comma-separated, or none")
	cmd.Flags().StringVar(&o.AdmitPublish, "admit-publish", runstore.AllowNone, "channels the run may post to, comma-separated, or none")
	return cmd
}

func newCmdResume(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "resume RUN [--local]",
		Short: "Take a run over and drive it on from its journal, on the manager or in this process",
		Long: `Resume a run that was released or whose driver died: read its recorded program,
activate its journal under the next fencing token and epoch (a driver still holding it
is superseded and stops at its next append), replay the journal and drive on. Effects
already settled are not performed again. The space's manager resumes it (it answers
at once; --json as for start; a run it already drives is refused); --local drives it
in this process, with the exit codes of start --local. A manager takes back every
run recorded running when it starts, so a run it drove needs no resume.`,
		Example: `  cotal run resume run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f
  cotal run resume run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f --local`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runstore.CheckID("run id", args[0]); err != nil {
				return cmdutil.FlagErrorf("%v; cotal run ps lists the runs", err)
			}
			if o.File != "" {
				return cmdutil.FlagErrorf("--file: resume uses the recorded program; an edited program is a migration, which is not supported yet")
			}
			if err := o.hostedFlags(); err != nil {
				return err
			}
			if !o.Local {
				return o.askManager(cmd.Context(), "run-resume", map[string]any{"runId": args[0]}, func(ctx context.Context, js jetstream.JetStream, space string) error {
					return refuseRevoked(ctx, js, space, args[0])
				})
			}
			return runResume(cmd.Context(), o, args[0])
		},
	}
	o.Mesh.Register(cmd.Flags())
	cmd.Flags().BoolVar(&o.Local, "local", false, "drive the run in this process, not on the space's manager")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the hosted run's id as a JSON object (not with --local)")
	cmd.Flags().StringVar(&o.File, "file", "", "refused: a run resumes its recorded program")
	return cmd
}

// hostedFlags refuses the flags that belong to one way of driving a run only.
func (o *Options) hostedFlags() error {
	if o.Local && o.JSON {
		return cmdutil.FlagErrorf("--json prints a hosted run's id; a --local drive prints its progress instead")
	}
	if admits := func(v string) bool { return v != "" && v != runstore.AllowNone }; !o.Local && (admits(o.AdmitRead) || admits(o.AdmitPublish)) {
		return cmdutil.FlagErrorf("--admit-read and --admit-publish admit a --local run; the manager admits a run it hosts with no channel (add --local to drive it here with a ceiling)")
	}
	return nil
}

// signalContext ends on SIGINT or SIGTERM, which releases the run.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func (o *Options) driverConfig(js jetstream.JetStream, space string) rundriver.Config {
	out := o.IO.Out
	return rundriver.Config{JS: js, Space: space,
		Log: func(_, line string) { fmt.Fprintf(out, "log: %s\n", cmdutil.OneLine(line)) },
		OnCheckpoint: func(key, prompt string) {
			fmt.Fprintf(out, "waiting at %s: %s\n", key, cmdutil.OneLine(prompt))
		},
	}
}

func runStart(ctx context.Context, o *Options) error {
	src, err := cmdutil.UserFile{Flag: "--file", Path: o.File, Kind: "a Cotal Lang program", Max: MaxProgramSize, Stdin: o.IO.In}.Read()
	if err != nil {
		return err
	}
	prog, runID, err := rundriver.Prepare(string(src))
	var refused *lang.RefusedError
	if errors.As(err, &refused) {
		for _, p := range refused.Problems {
			fmt.Fprintf(o.IO.ErrOut, "%s: %s\n", o.File, cmdutil.OneLine(p.String()))
		}
		return cmdutil.Refuse("the program "+o.File, fmt.Sprintf("it has %s (listed above); fix them and start again", cmdutil.Count(len(refused.Problems), "problem")), "")
	}
	if err != nil {
		return err
	}
	if !o.Local {
		return o.askManager(ctx, "run-start", map[string]any{"source": string(src), "file": o.File}, nil)
	}
	js, space, closeFn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := o.admit(ctx, js, space, runID); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "starting run %s on endpoint %s in space %s\n", runID, runstore.DefaultEndpoint, space)
	ctx, stop := signalContext(ctx)
	defer stop()
	out, err := rundriver.Start(ctx, o.driverConfig(js, space), prog, runID, o.File)
	if err != nil {
		return fmt.Errorf("start run %s: %w", runID, err)
	}
	return o.report(out)
}

func runResume(ctx context.Context, o *Options, runID string) error {
	js, space, closeFn, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := refuseRevoked(ctx, js, space, runID); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "resuming run %s on endpoint %s in space %s\n", runID, runstore.DefaultEndpoint, space)
	ctx, stop := signalContext(ctx)
	defer stop()
	out, err := rundriver.Resume(ctx, o.driverConfig(js, space), runID)
	if errors.Is(err, runstore.ErrNoRecord) {
		return cmdutil.Refuse("run "+runID, "the space has no record of it", "cotal run ps")
	}
	if err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	return o.report(out)
}

// report prints how a drive ended and answers its exit: 0 completed, 1 failed, 2 released.
func (o *Options) report(out rundriver.Outcome) error {
	switch out.State {
	case runstore.StateCompleted:
		fmt.Fprintf(o.IO.Out, "run %s: completed in %s\n", out.Run, cmdutil.Count(out.Steps, "step"))
		return nil
	case runstore.StateFailed:
		fmt.Fprintf(o.IO.ErrOut, "run %s: failed: %s\n", out.Run, cmdutil.OneLine(fmt.Sprint(out.Err)))
		return &cmdutil.ExitError{Code: 1}
	}
	why := "stopped"
	if out.Err != nil {
		why = out.Err.Error()
	}
	fmt.Fprintf(o.IO.ErrOut, "run %s: released — %s\n", out.Run, cmdutil.OneLine(why))
	if out.Held != nil {
		fmt.Fprintf(o.IO.ErrOut, "the run is held at an effect this host cannot perform; resume it where one can\n")
	} else {
		fmt.Fprintf(o.IO.ErrOut, "next: cotal run resume %s --local\n", out.Run)
	}
	return &cmdutil.ExitError{Code: 2}
}
