// Package authsvc runs the auth service of one user-auth space: the NATS auth callout that
// places sentinel connections carrying a Cotal bearer into the space's data account, and
// the loopback exchange that hands out those bearers.
package authsvc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/callout"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// StatusFile is the readiness file the lane writes into its state folder once the callout
// answers and the exchange accepts requests, and removes when it stops.
const StatusFile = "auth-service.json"

// connectTimeout bounds each broker connect and the ledger bucket lookup.
const connectTimeout = 10 * time.Second

// Status is the content of StatusFile: how a client reaches the exchange. It is the
// reference's auth-service.json (implementations/auth/src/store.ts saveAuthServiceInfo:
// {ver, url, pid, cap, publicUrl?}) followed by Go's extras issuer and space.
type Status struct {
	Ver int    `json:"ver"` // statusVersion
	URL string `json:"url"` // the exchange, http://127.0.0.1:<port>
	PID int    `json:"pid"` // the auth service's process
	Cap string `json:"cap"` // the per-start capability POST /exchange requires
	// PublicURL is the public face's URL, when the lane serves one.
	PublicURL string `json:"publicUrl,omitempty"`
	Issuer    string `json:"issuer"` // the bearer issuer, urn:cotal:auth:<space>
	Space     string `json:"space"`
}

// statusVersion is the ver of StatusFile.
const statusVersion = 1

// StateDir is the state folder of space's auth service inside the trust folder chainDir
// (.cotal/auth): space.<hex>. It holds the bearer issuer key, the owner secret and
// StatusFile.
func StateDir(chainDir, space string) string {
	return filepath.Join(chainDir, "space."+protocol.SpaceKey(space))
}

// ReadStatus reads StatusFile from dir. A missing file (fs.ErrNotExist) means no auth
// service is ready.
func ReadStatus(dir string) (Status, error) {
	b, err := os.ReadFile(filepath.Join(dir, StatusFile))
	if err != nil {
		return Status{}, fmt.Errorf("auth service status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return Status{}, fmt.Errorf("auth service status %s: %w", filepath.Join(dir, StatusFile), err)
	}
	// ver 0 is a file of a release before the reference's form; unknown fields are ignored.
	if s.Ver != statusVersion && s.Ver != 0 {
		return Status{}, fmt.Errorf("auth service status %s: version %d, want %d (restart the auth service: cotal up)", filepath.Join(dir, StatusFile), s.Ver, statusVersion)
	}
	return s, nil
}

// Lane is the auth service of one space. Set the fields, then call Run once.
type Lane struct {
	Space  string       // the space; its callout account must be loadable from Chain
	Server string       // broker URL
	TLSCA  string       // CA file (PEM) the broker's TLS certificate is checked against; "" means the system's roots
	Chain  *trust.Chain // the broker's trust chain
	// Dir is the state folder (StatusFile); empty means StateDir(Chain.Dir(), Space).
	Dir string
	// Store keeps the bearer issuer key and the owner secret, under "space.<hex>/"; nil
	// means files in the trust folder (the state folder's issuer.json and
	// owner-secret.json).
	Store bearer.Store
	// IdP verifies human ID tokens at the exchange.
	IdP exchange.IDTokenVerifier
	// IdPIssuer is the issuer of bare ledger subjects (see exchange.Server.IdPIssuer).
	IdPIssuer string
	// IdPClientID is the audience of the IdP's ID tokens, as the discovery bundle of a
	// public face tells clients.
	IdPClientID string
	// IdPURL is where people sign in (cotal login --idp), as the discovery bundle tells
	// clients; empty means IdPIssuer.
	IdPURL string
	// Public, when set, is the public face: a second listener meant to sit behind an
	// HTTPS reverse proxy (see exchange.PublicFace); Port 0 binds an ephemeral port.
	Public *exchange.PublicFace
	// Oracle tells whether the holder of a held plane claim is gone; nil means the space's
	// delivery daemon, asked over the plane's connection.
	Oracle      plane.Oracle
	Port        int           // the exchange's loopback port; 0 means ephemeral
	AuthTimeout time.Duration // bounds one authorization; 0 means the callout's default
	// CalloutOnly runs the callout alone: no exchange, no public face, no StatusFile
	// (bearers come from an exchange served elsewhere with the same keys).
	CalloutOnly bool
	// ServiceEndpoints registers the callout as the NATS micro service
	// callout.ServiceName, so `nats micro ls` shows it with its request counts.
	ServiceEndpoints bool
	Logger           *slog.Logger // nil means discard
}

// Run starts the lane: the authority plane (one privileged data-account connection, the
// ledger bucket and the plane claim), then the callout connection and its responder, then
// (unless CalloutOnly) the exchange; only then it writes StatusFile (0600, atomically; a
// stale one is removed once the lane holds the plane claim, so a lane the claim refuses
// leaves the holder's file in place) and calls ready. It blocks until ctx ends and returns nil
// then, or returns the error that stopped a part; a lost connection fences the lane at
// once and Run returns an error wrapping ErrFenced. StatusFile is removed, the claim
// released (unless fenced) and both connections closed before it returns, the plane last.
// A lane holds two broker connections while it serves: the plane's and the callout's (the
// callout's must be a user of the callout account, the plane's of the data account).
func (l *Lane) Run(ctx context.Context, ready func()) error {
	if err := l.check(); err != nil { // no I/O yet, nothing to undo
		return fmt.Errorf("auth service: %w", err)
	}
	r := &laneRun{Lane: l, log: l.Logger, dir: l.Dir, fence: newFence()}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.dir == "" {
		r.dir = StateDir(l.Chain.Dir(), l.Space)
	}
	err := r.serve(ctx, ready)
	if err == nil || errors.Is(err, ErrFenced) {
		return err // a fenced lane's error names the space and the connection it lost
	}
	return fmt.Errorf("auth service: %w", err)
}

// laneRun is the state of one Run.
type laneRun struct {
	*Lane
	log   *slog.Logger
	dir   string // the state folder
	fence *fence

	// Set by keys.
	ua     *trust.UserAuth
	issuer *bearer.Issuer
	secret bearer.OwnerSecret

	// The parts started by start: each sends its result on errs once; running counts
	// those not yet received.
	errs    chan error
	running int
}

func (r *laneRun) statusPath() string { return filepath.Join(r.dir, StatusFile) }

// serve is Run after the config check: it opens the parts in order, each undone by a
// defer, serves until ctx ends or a part stops, and returns an error naming the step.
func (r *laneRun) serve(ctx context.Context, ready func()) error {
	if err := r.keys(ctx); err != nil {
		return err
	}
	// The authority plane first: the ledger must be readable, and the plane ours, before
	// the callout takes its first request. It closes after everything else.
	auth, err := r.openAuthority(ctx, r.ua.DataAccount(), r.fence, r.log)
	if err != nil {
		return err
	}
	defer auth.close(r.log)
	// The plane is ours: a status file left now is a stale one (a lane refused by the
	// claim returned above and left the holder's file in place).
	if err := os.Remove(r.statusPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", r.statusPath(), err)
	}
	resp, err := r.responder(auth)
	if err != nil {
		return err
	}
	calloutConn, err := connect(r.Server, r.ua.CalloutCreds(), "cotal:auth-service:"+r.Space+":callout",
		append(client.TLSOptions(r.TLSCA), r.fence.watched("callout")...)...)
	if err != nil {
		return fmt.Errorf("callout account: %w", err)
	}
	defer calloutConn.Close()

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	r.errs = make(chan error, 2)
	defer func() {
		stop()
		for range r.running {
			<-r.errs
		}
	}()
	if err := r.start(ctx, func(up func()) error { return resp.Run(rctx, calloutConn, up) }); err != nil {
		return fmt.Errorf("callout: %w", err)
	}
	if r.CalloutOnly {
		r.log.Info("callout ready", "space", r.Space)
	} else {
		st, err := r.serveExchange(ctx, rctx, auth)
		if err != nil {
			return err
		}
		if err := r.writeStatus(st); err != nil {
			return err
		}
		defer removeOwnStatus(r.statusPath(), st.Cap)
		r.log.Info("auth service ready", "space", r.Space, "exchange", st.URL, "public", st.PublicURL)
	}
	if ready != nil {
		ready()
	}
	err = r.wait(ctx, calloutConn, stop)
	r.log.Info("auth service stopping", "space", r.Space, "err", err)
	return err
}

// keys prepares what the lane signs and checks with: the state folder, the space's
// callout account (known to the broker, its sentinel creds written), the bearer issuer
// key and the owner secret.
func (r *laneRun) keys(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("state folder: %w", err)
	}
	ua, err := r.Chain.UserAuth(r.Space)
	if err != nil {
		return err
	}
	if err := WriteSentinel(r.dir, ua.SentinelCreds()); err != nil {
		return err
	}
	if err := r.pushCalloutAccount(ctx, ua); err != nil {
		return err
	}
	store := r.Store
	if store == nil {
		store = bearer.FileStore{Dir: r.Chain.Dir()}
	}
	secrets := bearer.Within(store, "space."+protocol.SpaceKey(r.Space))
	if r.issuer, err = bearer.LoadFrom(secrets, r.Space); err != nil {
		return err
	}
	if r.secret, err = bearer.LoadOwnerSecretFrom(secrets); err != nil {
		return err
	}
	r.ua = ua
	return nil
}

// responder is the callout's responder, deciding with the lane's authorizer.
func (r *laneRun) responder(auth *authority) (*callout.Responder, error) {
	xkey, err := nkeys.FromSeed(r.ua.XKeySeed())
	if err != nil {
		return nil, fmt.Errorf("xkey: %w", err)
	}
	data := r.ua.DataAccount()
	verified, err := newVerifiedBearers(r.issuer)
	if err != nil {
		return nil, err
	}
	az := &authorizer{space: r.Space, chain: r.Chain, data: data, issuer: r.issuer, kv: auth.kv, acl: auth.acl, secret: r.secret,
		idpIssuer: r.IdPIssuer, fence: r.fence, recorded: map[string]string{}, verified: verified}
	return callout.New(callout.Config{
		Authorizer: az, XKey: xkey,
		CalloutAccount: r.ua.PublicKey(), CalloutSigner: r.ua.CalloutSigner(),
		DataAccount: data.PublicKey(), DataSigner: data.UserSigner(),
		Timeout: r.AuthTimeout, Logger: r.log, ServiceEndpoints: r.ServiceEndpoints, Space: r.Space,
	})
}

// start runs part on its own goroutine, counted in running, and waits until part calls
// up, fails first, or ctx ends.
func (r *laneRun) start(ctx context.Context, part func(up func()) error) error {
	up := make(chan struct{})
	r.running++
	go func() { r.errs <- part(func() { close(up) }) }()
	select {
	case <-up:
		return nil
	case err := <-r.errs:
		r.running--
		if err == nil {
			err = errors.New("stopped before it was ready")
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeStatus writes StatusFile (0600, atomically).
func (r *laneRun) writeStatus(st Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if err := atomicfile.WriteFile(r.statusPath(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", r.statusPath(), err)
	}
	return nil
}

// wait serves until ctx ends (nil), the lane is fenced (the fence's error, once the
// callout and the exchange stopped answering) or a part stops (its error).
func (r *laneRun) wait(ctx context.Context, calloutConn *nats.Conn, stop context.CancelFunc) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.fence.lost:
		// Fenced: the callout and the exchange stop answering now (the authorizer and
		// the ledger refuse from the instant of the trip; closing the callout connection
		// and stopping the exchange end the rest).
		calloutConn.Close()
		stop()
		err := r.fence.err(r.Space)
		r.log.Error("fenced", "err", err)
		return err
	case err := <-r.errs:
		r.running--
		if ctx.Err() != nil {
			return nil
		}
		if r.fence.tripped() {
			return r.fence.err(r.Space)
		}
		if err == nil {
			err = errors.New("stopped")
		}
		return err
	}
}

// removeOwnStatus removes the status file at path if it is still the one this lane wrote
// (its per-start capability is cap): a successor's file stays.
func removeOwnStatus(path, cap string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var st Status
	if json.Unmarshal(b, &st) == nil && st.Cap != cap {
		return
	}
	_ = os.Remove(path) // best effort on the way out; a stale file is removed at the next start
}

// serveExchange starts the exchange (and its public face) on rctx and returns the status
// the lane records once it listens.
func (r *laneRun) serveExchange(ctx, rctx context.Context, auth *authority) (Status, error) {
	ex := &exchange.Server{
		Issuer: r.issuer, Ledger: kvLedger{auth.kv, r.fence}, OwnerSecret: r.secret, IdP: r.IdP, IdPIssuer: r.IdPIssuer,
		Enroll: r.enroller(auth),
		Addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)), Logger: r.log,
		Public: r.Public,
		Discovery: exchange.Discovery{Space: r.Space, Server: r.Server, SentinelCreds: string(r.ua.SentinelCreds()),
			IdP: exchangewire.BundleIdP{URL: cmp.Or(r.IdPURL, r.IdPIssuer), Issuer: r.IdPIssuer, Audience: r.IdPClientID}},
	}
	addrs := make(chan net.Addr, 1)
	err := r.start(ctx, func(up func()) error {
		return ex.Run(rctx, func(a net.Addr) {
			addrs <- a
			up()
		})
	})
	if err != nil {
		return Status{}, err
	}
	return Status{Ver: statusVersion, URL: "http://" + (<-addrs).String(), Cap: ex.Cap, Issuer: r.issuer.Issuer(), PID: os.Getpid(), Space: r.Space,
		PublicURL: ex.PublicURL()}, nil
}

// check validates the configuration without I/O.
func (l *Lane) check() error {
	switch {
	case protocol.CheckSpace(l.Space) != nil:
		return protocol.CheckSpace(l.Space)
	case l.Server == "":
		return errors.New("no broker URL")
	case l.Chain == nil:
		return errors.New("no trust chain")
	case l.IdP == nil && !l.CalloutOnly:
		return errors.New("no IdP verifier")
	case l.Port < 0 || l.Port > 65535:
		return fmt.Errorf("port %d: want 0 (ephemeral) to 65535", l.Port)
	case l.AuthTimeout < 0:
		return fmt.Errorf("auth timeout %s: want a positive duration, or 0 for the default", l.AuthTimeout)
	}
	return nil
}

// pushCalloutAccount hands the callout account to the running broker over the system
// account, so a broker started before the space's first auth service knows it. The
// resolver keeps the newer of equal JWTs, so pushing a known account changes nothing.
func (l *Lane) pushCalloutAccount(ctx context.Context, ua *trust.UserAuth) error {
	sysCreds, err := l.Chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := connect(l.Server, sysCreds, "cotal-auth-push", client.TLSOptions(l.TLSCA)...)
	if err != nil {
		return fmt.Errorf("system account: %w", err)
	}
	defer sys.Close()
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	err = trust.PushAccount(pctx, sys, ua.AccountJWT())
	if errors.Is(err, nats.ErrNoResponders) {
		// A broker whose resolver takes no updates (accounts preloaded): it must know the
		// account already, or the callout connection below says so.
		return nil
	}
	return err
}

// connect opens a broker connection with a creds file held in memory, with opts after
// the defaults (it reconnects forever unless opts say otherwise); Run closes it.
func connect(url string, creds []byte, name string, opts ...nats.Option) (*nats.Conn, error) {
	c, err := trust.ReadCreds(creds)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserJWTAndSeed(c.JWT, c.Seed), nats.Name(name),
		nats.Timeout(connectTimeout), nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return nc, nil
}

// kvLedger is the exchange's view of the ledger bucket; a fenced lane reads nothing.
type kvLedger struct {
	kv    jetstream.KeyValue
	fence *fence
}

// Lookup reads actor's row.
func (k kvLedger) Lookup(ctx context.Context, actor string) (ledger.Row, error) {
	if k.fence.tripped() {
		return ledger.Row{}, ErrFenced
	}
	return ledger.Lookup(ctx, k.kv, actor)
}
