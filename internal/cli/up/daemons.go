package up

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/deliver"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Daemon supervision timings.
const (
	daemonReadyWait = 40 * time.Second // a stale delivery lease from a crashed run lasts up to 30 s
	daemonStopWait  = 15 * time.Second
	daemonRestart   = time.Second
	meshPoll        = 2 * time.Second // how often the broker looks for spaces added by `up --space`
)

// daemonKind is one kind of per-space daemon the broker process supervises.
type daemonKind struct {
	workspace.Daemon
	proj   *workspace.Project
	serves func(space string) bool              // whether space gets one
	args   func(space string) ([]string, error) // the cotal command line that runs it
}

// pidFile is written by the daemon once it serves.
func (k daemonKind) pidFile(space string) string { return k.PidFile(k.proj, space) }

func (k daemonKind) logFile(space string) string { return k.LogFile(k.proj, space) }

// deliveryKind is the delivery daemon of every space of an authenticated mesh, each with
// its own delivery credential.
func deliveryKind(chain *trust.Chain, proj *workspace.Project, server string) daemonKind {
	d, _ := workspace.DaemonNamed("delivery")
	return daemonKind{Daemon: d, proj: proj,
		serves: func(string) bool { return true },
		args: func(space string) ([]string, error) {
			creds, err := deliveryCreds(chain, proj, space)
			if err != nil {
				return nil, err
			}
			watch, err := watchCreds(chain, proj, space)
			if err != nil {
				return nil, err
			}
			evict, err := evictCreds(chain, proj, space)
			if err != nil {
				return nil, err
			}
			return []string{"deliver", "--space", space, "--server", server, "--creds", creds,
				"--system-creds", watch, "--evict-creds", evict, "--pidfile", d.PidFile(proj, space), "--wait"}, nil
		},
	}
}

// authKind is the auth service of every user-auth space (one with an IdP pin).
func authKind(chain *trust.Chain, proj *workspace.Project, server string) daemonKind {
	d, _ := workspace.DaemonNamed("auth")
	return daemonKind{Daemon: d, proj: proj,
		serves: func(space string) bool {
			_, err := authsvc.ReadPin(chain.Dir(), space)
			return err == nil
		},
		args: func(space string) ([]string, error) {
			return []string{"auth-service", "--space", space, "--server", server,
				"--pidfile", d.PidFile(proj, space)}, nil
		},
	}
}

// managerKind is the agent manager (cotal supervise) of every space but a user-auth one
// (whose agents hold no static credential the manager could mint), unless up was told
// --no-manager.
func managerKind(chain *trust.Chain, proj *workspace.Project, server string) daemonKind {
	d, _ := workspace.DaemonNamed("manager")
	return daemonKind{Daemon: d, proj: proj,
		serves: func(space string) bool {
			_, err := authsvc.ReadPin(chain.Dir(), space)
			return err != nil
		},
		args: func(space string) ([]string, error) {
			return []string{"supervise", "--space", space, "--server", server,
				"--pidfile", d.PidFile(proj, space), "--wait"}, nil
		},
	}
}

// kinds are the daemon kinds a broker process supervises.
func kinds(chain *trust.Chain, proj *workspace.Project, server string, noManager bool) []daemonKind {
	k := []daemonKind{deliveryKind(chain, proj, server), authKind(chain, proj, server)}
	if !noManager {
		k = append(k, managerKind(chain, proj, server))
	}
	return k
}

// daemons supervises one daemon of a kind per space of an authenticated mesh: each runs as
// a child of the broker process, is restarted when it exits while the broker runs (but
// not while `cotal down delivery` or `cotal down auth` holds it down: then once `cotal up`
// releases it), and is stopped, releasing what it holds, before the broker closes.
type daemons struct {
	kind daemonKind
	// executable finds this binary when the system cannot name the running image
	// (launch.Command).
	executable func() (string, error)
	proj       *workspace.Project
	log        *slog.Logger
	// life is the read end of a pipe whose write end only the broker process holds; each
	// daemon inherits it (cmdutil.ParentFDEnv) and stops at its end-of-file, so no daemon
	// outlives a broker process that was killed.
	life *os.File
	// standby: start does not wait for a daemon to serve. On a cluster every node runs the
	// space's daemons and one of them holds each lease; the others stand by.
	standby bool

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
	args, err := d.kind.args(space)
	if err != nil {
		return err
	}
	ready := make(chan error, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.supervise(ctx, space, args, ready)
	}()
	if d.standby {
		d.log.Info(d.kind.Title+" started; on a cluster it serves once it holds the space's lease", "space", space)
		return nil
	}
	select {
	case err := <-ready:
		return err
	case <-time.After(daemonReadyWait):
		return fmt.Errorf("%s of %s: not serving after %s; see %s", d.kind.Title, space, daemonReadyWait, d.kind.logFile(space))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startAll starts the daemons of every space the kind serves, one after the other.
func (d *daemons) startAll(ctx context.Context, spaces []string) error {
	for _, s := range spaces {
		if !d.kind.serves(s) {
			continue
		}
		if err := d.start(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// startWatch runs watch until ctx ends, counted in d.wg, so wait waits for it and for
// every start it makes: each goroutine of d is added to d.wg by startAll and startWatch
// before wait is called, or by a goroutine d.wg already counts, never after wait began
// with nothing counted.
func (d *daemons) startWatch(ctx context.Context) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.watch(ctx)
	}()
}

// watch starts daemons for spaces that `cotal up --space` adds to the running mesh; it
// runs counted in d.wg (startWatch), as does each start it makes.
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
			if !known && d.kind.serves(s) {
				d.wg.Add(1) // while watch itself is counted: wait has not returned
				go func() {
					defer d.wg.Done()
					if err := d.start(ctx, s); err != nil {
						d.log.Error(d.kind.Title, "space", s, "err", err)
					}
				}()
			}
		}
	}
}

// wait blocks until every supervised daemon has stopped (after ctx ended).
func (d *daemons) wait() { d.wg.Wait() }

// deliveryCreds mints the delivery daemon's credential (profile delivery) into the space's
// creds folder.
func deliveryCreds(chain *trust.Chain, proj *workspace.Project, space string) (string, error) {
	acct, err := chain.Space(space)
	if err != nil {
		return "", err
	}
	b, err := acct.Mint(trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery, Principal: deliver.DaemonPrincipal})
	if err != nil {
		return "", err
	}
	path := cmdutil.CredsPath(proj, space, "delivery")
	if err := os.MkdirAll(proj.CredsDir(space), 0o700); err != nil {
		return "", fmt.Errorf("creds folder: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// watchCreds writes the delivery daemon's system-account credential (trust.WatchCreds:
// connection events and CONNZ of its space only), with which it marks an agent offline the
// moment its connection drops.
func watchCreds(chain *trust.Chain, proj *workspace.Project, space string) (string, error) {
	return writeSpaceCreds(proj, space, "delivery-watch", chain.WatchCreds)
}

// evictCreds writes the delivery daemon's evictor (trust.EvictCreds: KICK only), with which
// it answers evictPrincipal and evictPrincipals on its admin rail.
func evictCreds(chain *trust.Chain, proj *workspace.Project, space string) (string, error) {
	return writeSpaceCreds(proj, space, "delivery-evict", chain.EvictCreds)
}

// writeSpaceCreds writes the credential mint makes for space to the space's creds file
// name (0600), and returns its path.
func writeSpaceCreds(proj *workspace.Project, space, name string, mint func(space string) ([]byte, error)) (string, error) {
	b, err := mint(space)
	if err != nil {
		return "", err
	}
	path := cmdutil.CredsPath(proj, space, name)
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// supervise runs the daemon until ctx ends or it exits cleanly, restarting it after a
// failure once it has served. The first start's readiness (or failure) goes to ready.
func (d *daemons) supervise(ctx context.Context, space string, args []string, ready chan<- error) {
	var once sync.Once
	var served atomic.Bool
	notify := func(err error) {
		once.Do(func() {
			served.Store(err == nil)
			ready <- err
		})
	}
	for {
		err := d.runOnce(ctx, space, args, notify)
		if !served.Load() {
			// It never served: forget it, so the mesh watch tries again later.
			d.mu.Lock()
			delete(d.running, space)
			d.mu.Unlock()
			return
		}
		// A bare cotal down stops the daemon and then this process: its reason is said even
		// when the stop of this process is seen first.
		pidFile := d.kind.pidFile(space)
		mesh := workspace.HeldForMesh(pidFile)
		if ctx.Err() != nil && !mesh {
			return
		}
		if held := workspace.HeldFile(pidFile); exists(held) {
			if mesh {
				d.log.Info(d.kind.Title+" stopped by cotal down, which stops the whole mesh", "space", space)
			} else {
				d.log.Info(d.kind.Title+" held down; cotal up starts it again", "space", space)
			}
			if !waitGone(ctx, held) {
				return
			}
			d.log.Info(d.kind.Title+" released; starting", "space", space)
			continue
		}
		d.log.Warn(d.kind.Title+" exited; restarting", "space", space, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(daemonRestart):
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitGone polls until path no longer exists (true) or ctx ends (false).
func waitGone(ctx context.Context, path string) bool {
	t := time.NewTicker(meshPoll)
	defer t.Stop()
	for exists(path) {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// runOnce starts one daemon process and waits for it; ready is called once it serves or
// exits first. On ctx end it is asked to stop (launch.Child.Stop), then killed after
// daemonStopWait.
func (d *daemons) runOnce(ctx context.Context, space string, args []string, ready func(error)) error {
	logf, err := os.OpenFile(d.kind.logFile(space), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		ready(fmt.Errorf("%s log: %w", d.kind.Title, err))
		return err
	}
	defer logf.Close()
	start := logSize(logf)
	cmd, err := launch.Command(d.executable, args...)
	if err != nil {
		ready(err)
		return err
	}
	cmd.Dir = d.proj.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := launch.Start(cmd, launch.Options{Lifeline: d.life})
	if err != nil {
		ready(fmt.Errorf("start %s of %s: %w", d.kind.Title, space, err))
		return err
	}
	readied := make(chan struct{})
	go func() {
		defer close(readied)
		if _, err := child.Ready(context.Background(), daemonStopWait); err == nil {
			ready(nil)
		} // else it exited: reported below
	}()
	select {
	case <-child.Exited():
		<-readied
		err := child.Err()
		if err != nil {
			err = fmt.Errorf("%s of %s exited (%w):\n%s", d.kind.Title, space, err, tail(d.kind.logFile(space), start))
		}
		ready(err)
		return err
	case <-ctx.Done():
		child.Stop(daemonStopWait) // it releases what it holds
		<-readied
		return nil
	}
}

// waitDaemon waits until the broker process has started the daemon of kind for space,
// which it does for every space in the mesh record the kind serves.
func waitDaemon(ctx context.Context, opts *Options, kind daemonKind, space string) error {
	if !kind.serves(space) {
		return nil
	}
	deadline := time.Now().Add(daemonReadyWait + meshPoll)
	for {
		if rec, err := workspace.ReadPidfile(kind.pidFile(space)); err == nil {
			if alive, _ := rec.Alive(); alive {
				fmt.Fprintf(opts.IO.Out, "✓ %s up (space %s, pid %d)\n", kind.Title, space, rec.PID)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s of %s: not serving after %s; see %s", kind.Title, space, daemonReadyWait, kind.logFile(space))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
