package up

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/deliver"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Delivery supervision timings.
const (
	deliveryReadyWait = 40 * time.Second // a stale lease from a crashed run lasts up to 30 s
	deliveryStopWait  = 15 * time.Second
	deliveryRestart   = time.Second
	meshPoll          = 2 * time.Second // how often the broker looks for spaces added by `up --space`
)

// daemons supervises one delivery daemon per space of an authenticated mesh: each runs as
// a child of the broker process with its own delivery credential, is restarted when it
// dies while the broker runs (but not after a clean exit: `cotal down delivery` asked it
// to stop), and is stopped, releasing its lease, before the broker closes.
type daemons struct {
	exe    string
	chain  *trust.Chain
	proj   *workspace.Project
	server string
	log    *slog.Logger

	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

// start supervises space's daemon from now on and returns once it first serves (or the
// first start failed, with its log tail).
func (d *daemons) start(ctx context.Context, space string) error {
	d.mu.Lock()
	if d.running[space] {
		d.mu.Unlock()
		return nil
	}
	d.running[space] = true
	d.mu.Unlock()
	creds, err := d.creds(space)
	if err != nil {
		return err
	}
	ready := make(chan error, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.supervise(ctx, space, creds, ready)
	}()
	select {
	case err := <-ready:
		return err
	case <-time.After(deliveryReadyWait):
		return fmt.Errorf("delivery daemon of %s: not serving after %s; see %s", space, deliveryReadyWait, d.proj.DeliveryLogFile(space))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watch starts daemons for spaces that `cotal up --space` adds to the running mesh.
func (d *daemons) watch(ctx context.Context) {
	t := time.NewTicker(meshPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mesh, err := d.proj.ReadMesh()
		if err != nil {
			continue // a mesh record being rewritten; the next tick reads it whole
		}
		for _, s := range mesh.Spaces {
			d.mu.Lock()
			known := d.running[s]
			d.mu.Unlock()
			if !known {
				go func() {
					if err := d.start(ctx, s); err != nil {
						d.log.Error("delivery daemon", "space", s, "err", err)
					}
				}()
			}
		}
	}
}

// wait blocks until every supervised daemon has stopped (after ctx ended).
func (d *daemons) wait() { d.wg.Wait() }

// creds mints the daemon's credential (profile delivery) into the space's creds folder.
func (d *daemons) creds(space string) (string, error) {
	acct, err := d.chain.Space(space)
	if err != nil {
		return "", err
	}
	b, err := acct.Mint(trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery, Principal: deliver.DaemonPrincipal})
	if err != nil {
		return "", err
	}
	path := cmdutil.CredsPath(d.proj, space, "delivery")
	if err := os.MkdirAll(d.proj.CredsDir(space), 0o700); err != nil {
		return "", fmt.Errorf("creds folder: %w", err)
	}
	if err := workspace.WriteFileAtomic(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// supervise runs the daemon until ctx ends or it exits cleanly, restarting it after a
// failure once it has served. The first start's readiness (or failure) goes to ready.
func (d *daemons) supervise(ctx context.Context, space, creds string, ready chan<- error) {
	var once sync.Once
	var served atomic.Bool
	notify := func(err error) {
		once.Do(func() {
			served.Store(err == nil)
			ready <- err
		})
	}
	for {
		err := d.runOnce(ctx, space, creds, notify)
		if !served.Load() {
			// It never served: forget it, so the mesh watch tries again later.
			d.mu.Lock()
			delete(d.running, space)
			d.mu.Unlock()
			return
		}
		if ctx.Err() != nil || err == nil {
			// Stopping, or asked to stop (cotal down delivery): it stays known, so the
			// mesh watch does not start it again.
			return
		}
		d.log.Warn("delivery daemon died; restarting", "space", space, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(deliveryRestart):
		}
	}
}

// runOnce starts one daemon process and waits for it; ready is called once it serves or
// exits first. On ctx end it is sent SIGTERM, then SIGKILL after deliveryStopWait.
func (d *daemons) runOnce(ctx context.Context, space, creds string, ready func(error)) error {
	logf, err := os.OpenFile(d.proj.DeliveryLogFile(space), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		ready(fmt.Errorf("delivery log: %w", err))
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		ready(err)
		return err
	}
	defer r.Close()
	cmd := exec.Command(d.exe, "deliver", "--space", space, "--server", d.server, "--creds", creds,
		"--pidfile", d.proj.DeliveryPidFile(space), "--wait")
	cmd.Args[0] = os.Args[0]
	cmd.Dir = d.proj.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, readyFDEnv+"=") }), readyFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		ready(fmt.Errorf("start delivery daemon of %s: %w", space, err))
		return err
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		if strings.HasPrefix(line, "ready ") {
			ready(nil)
		}
	}()
	select {
	case err := <-exited:
		if err != nil {
			err = fmt.Errorf("delivery daemon of %s exited (%w):\n%s", space, err, tail(d.proj.DeliveryLogFile(space)))
		}
		ready(err)
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM) // asked to stop; it releases its lease
		select {
		case <-exited:
		case <-time.After(deliveryStopWait):
			_ = cmd.Process.Kill()
			<-exited
		}
		return nil
	}
}

// waitDelivery waits until the broker process has started the delivery daemon of space,
// which it does for every space in the mesh record.
func waitDelivery(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	deadline := time.Now().Add(deliveryReadyWait + meshPoll)
	for {
		if rec, err := workspace.ReadPidfile(proj.DeliveryPidFile(space)); err == nil {
			if alive, _ := rec.Alive(); alive {
				fmt.Fprintf(opts.IO.Out, "✓ delivery daemon up (space %s, pid %d)\n", space, rec.PID)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("delivery daemon of %s: not serving after %s; see %s", space, deliveryReadyWait, proj.DeliveryLogFile(space))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
