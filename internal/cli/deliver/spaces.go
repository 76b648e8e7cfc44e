package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// anySpace stands in for --space while resolving the mesh of a multi-space host: each
// lane sets its own space.
const anySpace = "any"

// runDeliverSpaces runs `cotal deliver --spaces`: a space host with one delivery lane per
// space of a version 1 manifest, serving what it can. A broker lost for the whole process
// stays a process exit; SIGHUP reloads the manifest; SIGTERM closes every lane.
func runDeliverSpaces(ctx context.Context, opts *Options) error {
	// The host reads the list itself (and again on SIGHUP); a device, a FIFO or a huge
	// file is refused here first, before anything starts.
	if err := (cmdutil.UserFile{Flag: "--spaces", Path: opts.Spaces, Kind: "a space manifest (YAML or JSON)", Max: cmdutil.MaxManifestFileSize}).Check(); err != nil {
		return err
	}
	sys, evict, err := systemCreds(opts)
	if err != nil {
		return err
	}
	flags := opts.Mesh
	flags.Space = anySpace
	t, err := opts.Resolve(flags)
	if err != nil {
		return err
	}
	if t.Creds == "" && !t.Auth() {
		return noCredential("a delivery host", t)
	}
	cfg := delivery.Config{Spaces: opts.Spaces, Server: t.Server, TLSCA: t.TLSCA, SystemCreds: sys, EvictCreds: evict, BrokerGone: opts.BrokerGone, Version: opts.Version,
		Logger: slog.New(spacehost.NewPrefixHandler(opts.DaemonLog())),
		Creds:  func(space string) ([]byte, error) { return spaceCredential(opts, t, space) }}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = delivery.Serve(hctx, cfg, cmdutil.HostReady(opts.IO, "delivery host"), func(h *spacehost.Host) { cmdutil.ReloadOnHUP(hctx, h) })
	if err != nil {
		return cmdutil.HostError("a delivery host", opts.Spaces, err)
	}
	fmt.Fprintln(opts.IO.ErrOut, "delivery host stopped; leases released")
	return nil
}

// spaceCredential is one lane's credential: <space>.creds in the --creds folder, or one
// of profile delivery minted for the space from the project's keys (the mesh record read
// again, so a space added with `cotal up --space` opens at the next attempt).
func spaceCredential(opts *Options, t cmdutil.Target, space string) ([]byte, error) {
	if t.Creds != "" {
		p := filepath.Join(t.Creds, space+".creds")
		b, err := cmdutil.ReadCredsFile("--creds", p)
		if err != nil {
			return nil, fmt.Errorf("credential of space %s: %w", space, err)
		}
		return b, nil
	}
	t.Space = space
	if t.Project != nil {
		mesh, err := t.Project.ReadMesh()
		if err != nil && !errors.Is(err, workspace.ErrNoMesh) {
			return nil, fmt.Errorf("mesh record: %w", err)
		}
		if err == nil {
			t.Mesh = mesh
		}
	}
	return opts.Mint(t, trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery, Principal: DaemonPrincipal})
}
