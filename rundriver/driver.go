// Package rundriver drives a workflow run in the calling process (`cotal run … --local`):
// it activates the run on its journal (runstore), runs the program (lang) from the top
// with a journaling effect boundary, and records the run's spec, program and status.
//
// Every effect is journaled pending before it is performed and settled after. On resume
// the program runs from the top again: a settled effect answers its recorded result and
// is not performed again, a pending one is re-attached under its recorded request id
// (a sleep keeps its deadline, a checkpoint keeps its token and its answers), and the
// first effect the journal lacks is performed live.
//
// Every driver performs the effects that need no seat: sleep, checkpoint (answered
// through the records bucket), notify (notice records), waitUntil and log, and the
// scopes parallel, race and fanOut (a race's losers are cancelled: an effect in flight on
// a losing branch is withdrawn and settled cancelled), conclave (its members' durable
// membership rows on a derived or named channel, written from a plan bound before them
// and released when the body ends, fails or is cancelled; conclave.go),
// wait(replied(...)), monitor, and the channel waits wait(message(...)) and
// wait(idle(...)) (chanwait.go: a durable consumer per wait, read only on what the run's
// admission admits). spawn, turn, ask and wait(down(...)) need a Seats (the manager
// hosting the run); without one the step is settled refused (L5016) and the run
// released, held, for a host that can.
package rundriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

// DefaultCheckpointTimeout is a checkpoint's timeout when its program names none.
const DefaultCheckpointTimeout = time.Hour

// Config is where and as whom a driver works.
type Config struct {
	JS       jetstream.JetStream
	Space    string
	Endpoint string                   // "" means runstore.DefaultEndpoint
	Clock    func() int64             // the host clock in ms; nil means time.Now
	Log      func(scope, line string) // a program's log lines; nil drops them
	Logger   *slog.Logger             // the driver's own events; nil means slog.Default
	// Checkpoint is the timeout of a checkpoint whose program names none; 0 means
	// DefaultCheckpointTimeout.
	CheckpointTimeout time.Duration
	// OnCheckpoint, when set, is told each checkpoint this driver waits at (its step key
	// and prompt), once the wait is journaled and an answer can be filed.
	OnCheckpoint func(key, prompt string)

	// Holder is the holder id this drive activates the run as; "" mints a local driver's
	// (NewHolder). A hosting manager names each attempt its own.
	Holder string

	// Seats performs spawn, turn and ask (the manager hosting the run); nil settles them
	// refused (L5016) and releases the run, held, for a host that can.
	Seats Seats

	// LeaveRunning keeps a run recorded running when ctx ends the drive (a hosting
	// manager stopping), so the next host start takes it back; a local drive records it
	// released.
	LeaveRunning bool

	// BeforeSettle, for crash tests, runs after an effect was performed and before its
	// settle is appended: a driver killed there leaves the journal pending.
	BeforeSettle func(key string)

	// beforeSettleCP, for race tests, runs when a checkpoint's wait has ended and before
	// its plane settle is written.
	beforeSettleCP func(token string)
}

// Outcome is how a drive ended.
type Outcome struct {
	Run   string
	State string            // completed, failed or released
	Steps int               // the step keys the journal holds
	Err   error             // why it failed or was released; nil when completed
	Held  *lang.EffectError // the refused effect that released the run, if any
}

// ErrHeld releases a run at an effect this host cannot perform.
var ErrHeld = errors.New("run held")

func (c *Config) now() int64 {
	if c.Clock != nil {
		return c.Clock()
	}
	return time.Now().UnixMilli()
}

func (c *Config) holder() string {
	if c.Holder != "" {
		return c.Holder
	}
	return NewHolder()
}

func (c *Config) endpoint() string {
	if c.Endpoint == "" {
		return runstore.DefaultEndpoint
	}
	return c.Endpoint
}

// NewHolder mints a local driver's holder id: cli_run_<8 hex>.
func NewHolder() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "cli_run_" + hex.EncodeToString(b[:])
}

// Prepare validates source and mints a new run's id, before anything is written; the
// caller announces the id and then Starts it.
func Prepare(source string) (*lang.Program, string, error) {
	prog, err := lang.Compile(source)
	if err != nil {
		return nil, "", err
	}
	return prog, runstore.NewRunID(), nil
}

// Start activates a new run, records its spec, program and status, and drives it to
// its end (or until ctx ends, which releases it).
func Start(ctx context.Context, cfg Config, prog *lang.Program, run, file string) (Outcome, error) {
	lease := runstore.Lease{Holder: cfg.holder(), FencingToken: 1, Epoch: 1}
	_, ap, err := runstore.Activate(ctx, cfg.JS, cfg.Space, run, lease, true, cfg.now)
	if err != nil {
		return Outcome{}, err
	}
	recs, err := runstore.OpenRecords(ctx, cfg.JS, cfg.Space)
	if err != nil {
		return Outcome{}, err
	}
	ep, at := cfg.endpoint(), cfg.now()
	spec := runstore.RunSpec{V: 1, Run: run, Pins: runstore.DefaultPins(run, at), CreatedAt: at}
	if err := recs.Create(ctx, runstore.RunSpecKey(ep, run), spec); err != nil {
		return Outcome{}, fmt.Errorf("start run %s: %w", run, err)
	}
	if err := recs.Create(ctx, runstore.ProgramKey(ep, run), runstore.Program{V: 1, Run: run, Source: prog.Source, File: file, At: at}); err != nil {
		return Outcome{}, fmt.Errorf("start run %s: %w", run, err)
	}
	d := newDrive(cfg, recs, ap, run, lease, spec, nil)
	return d.drive(ctx, prog)
}

// Resume takes a recorded run over with the next fencing token and epoch, replays its
// journal and drives it on from where it stopped.
func Resume(ctx context.Context, cfg Config, run string) (Outcome, error) {
	if err := runstore.CheckID("run id", run); err != nil {
		return Outcome{}, err
	}
	recs, err := runstore.OpenRecords(ctx, cfg.JS, cfg.Space)
	if err != nil {
		return Outcome{}, err
	}
	ep := cfg.endpoint()
	var spec runstore.RunSpec
	if _, err := recs.Get(ctx, runstore.RunSpecKey(ep, run), &spec); err != nil {
		return Outcome{}, fmt.Errorf("resume run %s: %w", run, err)
	}
	var program runstore.Program
	if _, err := recs.Get(ctx, runstore.ProgramKey(ep, run), &program); err != nil {
		return Outcome{}, fmt.Errorf("resume run %s: its program is not recorded: %w", run, err)
	}
	if spec.Pins.LanguageVersion != lang.LanguageVersion {
		return Outcome{}, fmt.Errorf("resume run %s: L5008: it was started under language version %q; this engine speaks %q",
			run, spec.Pins.LanguageVersion, lang.LanguageVersion)
	}
	var status runstore.RunStatus
	if _, err := recs.Get(ctx, runstore.RunStatusKey(ep, run), &status); err != nil && !errors.Is(err, runstore.ErrNoRecord) {
		return Outcome{}, fmt.Errorf("resume run %s: %w", run, err)
	}
	if status.State == runstore.StateCompleted || status.State == runstore.StateFailed {
		return Outcome{}, fmt.Errorf("resume run %s: it has %s; there is nothing to resume", run, status.State)
	}
	prog, err := lang.Compile(program.Source)
	if err != nil {
		return Outcome{}, fmt.Errorf("resume run %s: its recorded program: %w", run, err)
	}
	// The next lease is above both the status and the journal's last activation: a driver
	// that died between its activation and its status write left the journal ahead.
	token, epoch := status.FencingToken, status.Epoch
	seen, _, err := runstore.Replay(ctx, cfg.JS, cfg.Space, run)
	if err != nil {
		return Outcome{}, fmt.Errorf("resume run %s: %w", run, err)
	}
	if a := runstore.LastActivation(seen); a != nil {
		token, epoch = max(token, a.FencingToken), max(epoch, a.Epoch)
	}
	lease := runstore.Lease{Holder: cfg.holder(), FencingToken: token + 1, Epoch: epoch + 1}
	prefix, ap, err := runstore.Activate(ctx, cfg.JS, cfg.Space, run, lease, false, cfg.now)
	if err != nil {
		return Outcome{}, fmt.Errorf("resume run %s: %w", run, err)
	}
	if high := int64(len(prefix)) - 1; high < status.JournalHigh {
		return Outcome{}, fmt.Errorf("resume run %s: the journal ends at record %d but record %d was written: %w", run, high, status.JournalHigh, runstore.ErrTruncated)
	}
	d := newDrive(cfg, recs, ap, run, lease, spec, prefix)
	return d.drive(ctx, prog)
}
