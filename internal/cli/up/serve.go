// Mode serve: the embedded broker in this process, its spaces provisioned and its daemons supervised.

package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// provisionSpace creates the space's streams and buckets, as its account's provisioner
// on an authenticated mesh (chain set) or anonymously on an open one, and on an
// authenticated mesh the bind-only durables of every persona of the project and, when it
// has none yet, its read ACL row (cmdutil.SeedReadACL). A persona file that does not parse is skipped with a warning on w.
// replicas is --replicas (0: the default for the server, see spaceReplicas); room, when
// set, is the embedded broker's Room, asked before a missing stream is created.
func provisionSpace(ctx context.Context, w io.Writer, chain *trust.Chain, proj *workspace.Project, server, ca, space string, replicas int, room func(int) error) error {
	var creds []byte
	class := provision.ClassLive // an open mesh has no delivery daemon
	if chain != nil {
		acct, err := chain.Space(space)
		if err != nil {
			return err
		}
		creds, err = acct.Mint(trust.UserSpec{Name: "cotal up", Profile: trust.ProfileProvisioner,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_up"}, ExpiresIn: time.Hour})
		if err != nil {
			return err
		}
		class = provision.ClassDurable
	}
	nc, err := cmdutil.DialCreds(server, creds, ca, "")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream on %s: %w", server, err)
	}
	popts, err := spaceReplicas(ctx, chain, nc, ca, replicas)
	if err != nil {
		return err
	}
	popts.DefaultDeliveryClass = class
	popts.Room = room
	rep, err := provision.Space(ctx, js, space, popts)
	if err != nil {
		return replicasRefusal(err, server, space, popts.Replicas)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "! %s\n", n)
	}
	if chain == nil {
		return nil
	}
	files, err := proj.PersonaFiles()
	if err != nil {
		return err
	}
	for _, pf := range files {
		if pf.Err != nil {
			fmt.Fprintf(w, "! persona %s skipped: %v\n", pf.Name, pf.Err)
			continue
		}
		per := pf.Persona
		uid, err := chain.Identity(space, per.Name)
		if err != nil {
			return err
		}
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: per.Name}
		if _, err := provision.Agent(ctx, js, space, p, uid, per.Role); err != nil {
			return err
		}
		if err := cmdutil.SeedReadACL(ctx, js, space, p, uid, per.ReadACL()); err != nil {
			return err
		}
	}
	return nil
}

// serve runs the broker in this process until ctx ends or the broker stops. On an
// authenticated mesh it serves every space the project's trust chain holds.
func serve(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	host, port, _ := opts.listen() // checked by the command
	store := opts.StoreDir
	if store == "" {
		store = proj.StoreDir()
	}
	srv := &broker.Server{Dir: store, Host: host, Port: port,
		TLSCert: opts.TLSCert, TLSKey: opts.TLSKey, TLSCA: opts.TLSCA, ClusterTLS: opts.ClusterTLS}
	if opts.ClusterName != "" {
		chost, cport, _ := clusterAddr(opts.ClusterListen) // checked by the command
		routes, _ := broker.ParseRoutes(opts.Routes)
		srv.Cluster = &broker.Cluster{Name: opts.ClusterName, Host: chost, Port: cport, Routes: routes}
		srv.Logger = slog.New(cmdutil.LogHandler(opts.IO.ErrOut, slog.LevelWarn))
	}
	spaces := []string{space}
	var chain *trust.Chain
	if !opts.Open {
		var err error
		if chain, err = trust.Open(proj.AuthDir()); err != nil {
			return err
		}
		if _, err := chain.Space(space); err != nil {
			return err
		}
		known, err := chain.Spaces()
		if err != nil {
			return err
		}
		for _, s := range known {
			if s != space {
				spaces = append(spaces, s)
			}
		}
		if _, err := opts.applyLimits(chain, space, spaces, opts.IO.ErrOut); err != nil {
			return err
		}
		if srv.Accounts, err = chain.AccountJWTs(); err != nil {
			return err
		}
		srv.OperatorJWT, srv.SystemAccount = chain.OperatorJWT(), chain.SystemAccount()
		srv.ResolverDir = filepath.Join(proj.AuthDir(), "accounts")
		if srv.Cluster != nil {
			srv.Cluster.Secret = chain.RouteSecret()
		}
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer srv.Close()
	if c := srv.Capacity(); c.OpenFiles > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "broker capacity: %s written at once (open-file limit %d, hard limit %d; each space being written holds %d open files): raise the limit to hold more\n",
			cmdutil.Count(c.Spaces, "space"), c.OpenFiles, c.HardFiles, broker.SpaceFiles)
	}
	clusterNote := ""
	if srv.Cluster != nil {
		err := srv.WaitJetStream(ctx, func(what string) {
			fmt.Fprintf(opts.IO.ErrOut, "%s: start cotal up on the other nodes (routes %s)\n", what, opts.Routes)
		})
		if err != nil {
			return err
		}
		clusterNote = fmt.Sprintf(", cluster %s node %s routes on %s", opts.ClusterName, srv.Name(), srv.ClusterAddr())
	}
	if err := opts.restoreSpaces(ctx, chain, srv.ClientURL(), opts.TLSCA); err != nil {
		return err
	}
	// A space waits for room while the block files of those just provisioned close.
	room := func(streams int) error { return srv.WaitRoom(ctx, streams) }
	for _, s := range spaces {
		provision := func() error {
			return provisionSpace(ctx, opts.IO.ErrOut, chain, proj, srv.ClientURL(), opts.TLSCA, s, opts.Replicas, room)
		}
		if srv.Cluster != nil {
			provision = func() error {
				return provisionClustered(ctx, opts.IO.ErrOut, chain, proj, srv.ClientURL(), opts.TLSCA, s, opts.Replicas, room)
			}
		}
		if err := provision(); err != nil {
			return err
		}
	}
	if err := applyManifest(ctx, opts, chain, proj, srv.ClientURL()); err != nil {
		return err
	}
	ready := srv.ClientURL() + " " + srv.ListenAddr()
	if srv.Cluster != nil {
		ready += " " + srv.Name() + " " + srv.ClusterAddr()
	}
	return supervise(ctx, opts, proj, chain, served{space: space, spaces: spaces, url: srv.ClientURL(), listen: srv.ListenAddr(),
		store: store, note: clusterNote, ready: ready, standby: srv.Cluster != nil, done: srv.Done()})
}

// served is what a started mesh serves, for supervise.
type served struct {
	space   string          // the space named (or the default one)
	spaces  []string        // every space served, space first
	url     string          // the URL clients dial
	listen  string          // the address bound ("" for an external broker)
	store   string          // the JetStream store ("" for an external broker)
	note    string          // added to the ready line
	ready   string          // what cmdutil.SignalReady reports to a detaching parent
	standby bool            // daemons stand by for their lease (a cluster node)
	done    <-chan struct{} // closed when the broker stops (nil: never seen)
}

// supervise records the mesh, runs the daemons of an authenticated mesh, reports ready and
// serves until ctx ends or the broker stops.
func supervise(ctx context.Context, opts *Options, proj *workspace.Project, chain *trust.Chain, sv served) error {
	space, spaces, store := sv.space, sv.spaces, sv.store
	mesh := &workspace.Mesh{Server: sv.url, Mode: opts.mode(), Spaces: spaces,
		StoreDir: store, Root: proj.Root, PID: os.Getpid(), Started: time.Now().UTC(), TLSCA: opts.TLSCA}
	if err := workspace.WritePidfile(proj.PidFile(), os.Getpid()); err != nil {
		return err
	}
	defer workspace.RemovePidfile(proj.PidFile())
	if err := proj.WriteMesh(mesh); err != nil {
		return err
	}
	defer proj.RemoveMesh()
	if err := proj.ReleaseHeld(); err != nil { // left by a mesh that did not stop cleanly
		return err
	}

	what := modeName(opts.mode())
	if chain != nil {
		log := slog.New(cmdutil.LogHandler(opts.IO.ErrOut, slog.LevelInfo))
		// The daemons' lifeline: this process alone holds the write end, so its end, even
		// by SIGKILL, is an end-of-file every daemon sees.
		lifeR, lifeW, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("daemon lifeline: %w", err)
		}
		defer lifeW.Close()
		defer lifeR.Close()
		dctx, stop := context.WithCancel(ctx)
		for _, kind := range kinds(chain, proj, sv.url, opts.NoManager) {
			d := &daemons{kind: kind, executable: opts.Executable, proj: proj, running: map[string]bool{}, log: log, life: lifeR,
				standby: sv.standby}
			// supervise returns before serve closes the broker: daemons release what they
			// hold while the broker still serves.
			defer d.wait()
			if err := d.startAll(dctx, spaces); err != nil {
				stop()
				return err
			}
			d.startWatch(dctx)
		}
		defer stop()
		what += ", delivery up"
		n := countUserAuth(chain, spaces)
		if n > 0 {
			what += ", auth service up for " + cmdutil.Count(n, "user-auth space")
		}
		if !opts.NoManager && n < len(spaces) {
			what += ", manager up"
		}
	}
	storeNote := ""
	if store != "" {
		storeNote = ", store " + store
	}
	opts.served = true
	fmt.Fprintf(opts.IO.Out, "✓ cotal up: %s (space %s, %s%s%s)\n", readyAddr(sv.url, sv.listen), space, what, sv.note, storeNote)
	if err := cmdutil.SignalReady(opts.Getenv, sv.ready); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(opts.IO.ErrOut, "stopping the mesh")
		return nil
	case <-sv.done:
		return fmt.Errorf("broker at %s stopped unexpectedly; see %s", sv.url, proj.LogFile())
	}
}

// countUserAuth counts the user-auth spaces among spaces.
func countUserAuth(chain *trust.Chain, spaces []string) int {
	n := 0
	for _, s := range spaces {
		if _, err := authsvc.ReadPin(chain.Dir(), s); err == nil {
			n++
		}
	}
	return n
}
