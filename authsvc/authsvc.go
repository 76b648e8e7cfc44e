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
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/callout"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
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
	// delivery daemon, asked over the plane's records connection.
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

// Run starts the lane: the authority plane (two privileged data-account connections, the
// ledger bucket and the plane claim), then the callout connection and its responder, then
// (unless CalloutOnly) the exchange; only then it writes StatusFile (0600, atomically; a
// stale one is removed once the lane holds the plane claim, so a lane the claim refuses
// leaves the holder's file in place) and calls ready. It blocks until ctx ends and returns nil
// then, or returns the error that stopped a part; a lost connection fences the lane at
// once and Run returns an error wrapping ErrFenced. StatusFile is removed, the claim
// released (unless fenced) and every connection closed before it returns, the plane last.
func (l *Lane) Run(ctx context.Context, ready func()) error {
	if err := l.check(); err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := l.Dir
	if dir == "" {
		dir = StateDir(l.Chain.Dir(), l.Space)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth service: state folder: %w", err)
	}
	statusPath := filepath.Join(dir, StatusFile)

	ua, err := l.Chain.UserAuth(l.Space)
	if err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	if err := WriteSentinel(dir, ua.SentinelCreds()); err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	if err := l.pushCalloutAccount(ctx, ua); err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	store := l.Store
	if store == nil {
		store = bearer.FileStore{Dir: l.Chain.Dir()}
	}
	secrets := bearer.Within(store, "space."+protocol.SpaceKey(l.Space))
	issuer, err := bearer.LoadFrom(secrets, l.Space)
	if err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	secret, err := bearer.LoadOwnerSecretFrom(secrets)
	if err != nil {
		return fmt.Errorf("auth service: %w", err)
	}

	// The authority plane first: the ledger must be readable, and the plane ours, before
	// the callout takes its first request. It closes after everything else.
	f := newFence()
	data := ua.DataAccount()
	auth, err := l.openAuthority(ctx, data, f, log)
	if err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	defer auth.close(log)
	kv := auth.kv
	// The plane is ours: a status file left now is a stale one (a lane refused by the
	// claim returned above and left the holder's file in place).
	if err := os.Remove(statusPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("auth service: remove stale %s: %w", statusPath, err)
	}

	xkey, err := nkeys.FromSeed(ua.XKeySeed())
	if err != nil {
		return fmt.Errorf("auth service: xkey: %w", err)
	}
	az := &authorizer{space: l.Space, chain: l.Chain, data: data, issuer: issuer, kv: kv, acl: auth.acl, secret: secret,
		idpIssuer: l.IdPIssuer, fence: f, recorded: map[string]string{}}
	resp, err := callout.New(callout.Config{
		Authorizer: az, XKey: xkey,
		CalloutAccount: ua.PublicKey(), CalloutSigner: ua.CalloutSigner(),
		DataAccount: data.PublicKey(), DataSigner: data.UserSigner(),
		Timeout: l.AuthTimeout, Logger: log, ServiceEndpoints: l.ServiceEndpoints, Space: l.Space,
	})
	if err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	calloutConn, err := connect(l.Server, ua.CalloutCreds(), "cotal:auth-service:"+l.Space+":callout", append(client.TLSOptions(l.TLSCA), f.watched("callout")...)...)
	if err != nil {
		return fmt.Errorf("auth service: callout account: %w", err)
	}
	defer calloutConn.Close()

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 2)
	running := 0
	defer func() {
		stop()
		for range running {
			<-errs
		}
	}()

	calloutReady := make(chan struct{})
	running++
	go func() { errs <- resp.Run(rctx, calloutConn, func() { close(calloutReady) }) }()
	if err := waitReady(ctx, calloutReady, errs, &running); err != nil {
		return fmt.Errorf("auth service: callout: %w", err)
	}

	if l.CalloutOnly {
		log.Info("callout ready", "space", l.Space)
	} else {
		st, err := l.serveExchange(ctx, rctx, ua, issuer, auth, secret, f, errs, &running, log)
		if err != nil {
			return fmt.Errorf("auth service: %w", err)
		}
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return fmt.Errorf("auth service: status: %w", err)
		}
		if err := atomicfile.WriteFile(statusPath, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("auth service: write %s: %w", statusPath, err)
		}
		defer removeOwnStatus(statusPath, st.Cap)
		log.Info("auth service ready", "space", l.Space, "exchange", st.URL, "public", st.PublicURL)
	}
	if ready != nil {
		ready()
	}

	select {
	case <-ctx.Done():
		return nil
	case <-f.lost:
		// Fenced: the callout and the exchange stop answering now (the authorizer and
		// the ledger refuse from the instant of the trip; closing the callout connection
		// and stopping the exchange end the rest).
		calloutConn.Close()
		stop()
		err := f.err(l.Space)
		log.Error("fenced", "err", err)
		return err
	case err := <-errs:
		running--
		if ctx.Err() != nil {
			return nil
		}
		if f.tripped() {
			return f.err(l.Space)
		}
		if err == nil {
			err = errors.New("stopped")
		}
		return fmt.Errorf("auth service: %w", err)
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

// serveExchange starts the exchange (and its public face) on rctx, counted in running, and
// returns the status the lane records once it listens.
func (l *Lane) serveExchange(ctx, rctx context.Context, ua *trust.UserAuth, issuer *bearer.Issuer, auth *authority,
	secret bearer.OwnerSecret, f *fence, errs chan error, running *int, log *slog.Logger) (Status, error) {
	ex := &exchange.Server{
		Issuer: issuer, Ledger: kvLedger{auth.kv, f}, OwnerSecret: secret, IdP: l.IdP, IdPIssuer: l.IdPIssuer,
		Enroll: l.enroller(auth),
		Addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port)), Logger: log,
		Public: l.Public,
		Discovery: exchange.Discovery{Space: l.Space, Server: l.Server, SentinelCreds: string(ua.SentinelCreds()),
			IdP: exchangewire.BundleIdP{URL: cmp.Or(l.IdPURL, l.IdPIssuer), Issuer: l.IdPIssuer, Audience: l.IdPClientID}},
	}
	addrs := make(chan net.Addr, 1)
	exReady := make(chan struct{})
	*running++
	go func() {
		errs <- ex.Run(rctx, func(a net.Addr) {
			addrs <- a
			close(exReady)
		})
	}()
	if err := waitReady(ctx, exReady, errs, running); err != nil {
		return Status{}, err
	}
	return Status{Ver: statusVersion, URL: "http://" + (<-addrs).String(), Cap: ex.Cap, Issuer: issuer.Issuer(), PID: os.Getpid(), Space: l.Space,
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

// waitReady waits for ready, or for a part that fails before it, or for ctx.
func waitReady(ctx context.Context, ready <-chan struct{}, errs <-chan error, running *int) error {
	select {
	case <-ready:
		return nil
	case err := <-errs:
		*running--
		if err == nil {
			err = errors.New("stopped before it was ready")
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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

// authorizer admits a sentinel connection whose auth_token is a valid bearer of the space
// for an actor the ledger still grants to the bearer's owner.
type authorizer struct {
	space     string
	chain     *trust.Chain
	data      *trust.Account
	issuer    *bearer.Issuer
	kv        jetstream.KeyValue
	acl       jetstream.KeyValue // where grants are recorded for the delivery daemon
	secret    bearer.OwnerSecret
	idpIssuer string
	fence     *fence

	mu       sync.Mutex
	recorded map[string]string // member key -> fingerprint of the last grant recorded
}

// record stores the grant's read ACL for the delivery daemon (delivery.RecordGrant),
// unless the same one is already recorded.
func (a *authorizer) record(ctx context.Context, p protocol.Principal, uid, name, userKey string, sub jwt.Permission) error {
	key := protocol.MemberKey(p, uid)
	fp := strings.Join(sub.Allow, "\n") + "\x00" + strings.Join(sub.Deny, "\n")
	a.mu.Lock()
	same := a.recorded[key] == fp
	a.mu.Unlock()
	if same {
		return nil
	}
	if err := delivery.RecordGrant(ctx, a.acl, p, uid, name, userKey, sub, time.Now()); err != nil {
		return err
	}
	a.mu.Lock()
	a.recorded[key] = fp
	a.mu.Unlock()
	return nil
}

// Authorize implements callout.Authorizer.
func (a *authorizer) Authorize(ctx context.Context, req *jwt.AuthorizationRequest) (callout.Grant, error) {
	if a.fence.tripped() {
		return callout.Grant{}, fmt.Errorf("%w: %w", callout.ErrDropped, ErrFenced)
	}
	c, err := a.issuer.Verify(req.ConnectOptions.Token)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("bearer refused: %w", err)
	}
	// The reply inbox is the connection's own, named by the client (the reference's
	// callout.ts assertInboxConnId): the server-generated user key is unknown to it.
	inbox := req.ConnectOptions.Name
	if !userauth.ValidInboxName(inbox) {
		return callout.Grant{}, fmt.Errorf("invalid connId/inbox nonce %q - must match [A-Za-z0-9_-]{8,120} (connect with the name ibx<32 hex> and the inbox prefix _INBOX_<name>)", inbox)
	}
	row, err := ledger.Lookup(ctx, a.kv, c.Actor)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	if !row.HasOwner(a.secret, a.idpIssuer, c.Owner) {
		return callout.Grant{}, fmt.Errorf("actor %q is no longer granted to this owner", c.Actor)
	}
	uid := c.LifecycleUID // enrolled at the exchange; a bearer without one is looked up
	if uid == "" {
		if uid, err = a.chain.Identity(a.space, c.Actor); err != nil {
			return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
		}
	}
	p := protocol.Principal{Owner: c.Owner, Actor: c.Actor}
	spec := trust.UserSpec{
		// The reference's callout.ts names the user principalKey(owner, actor).name, the
		// dash form, which CONNZ reports as the connection's authorized user.
		Name:           p.Dash(),
		Profile:        trust.ProfileAgent,
		Principal:      p,
		LifecycleUID:   uid,
		Role:           row.Role,
		AllowSubscribe: row.AllowSubscribe,
		AllowPublish:   row.AllowPublish,
	}
	perms, err := a.data.Permissions(spec, req.UserNkey)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	// The profile's inbox is the server-generated user key's; grant the connection's
	// named one instead.
	own := "_INBOX_" + req.UserNkey + ".>"
	for i, s := range perms.Sub.Allow {
		if s == own {
			perms.Sub.Allow[i] = userauth.InboxPrefix(inbox) + ".>"
		}
	}
	tags := jwt.TagList{"owner:" + c.Owner, "actor:" + c.Actor, "principal:" + spec.Principal.String(), "uid:" + uid}
	if row.Role != "" {
		tags = append(tags, "role:"+row.Role)
	}
	tags = append(tags, "profile:"+string(trust.ProfileAgent))
	if err := a.record(ctx, spec.Principal, uid, spec.Name, req.UserNkey, perms.Sub); err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	if a.fence.tripped() { // fenced while this request was being decided
		return callout.Grant{}, fmt.Errorf("%w: %w", callout.ErrDropped, ErrFenced)
	}
	return callout.Grant{Name: spec.Name, Permissions: perms, Tags: tags, Expires: c.Expiry}, nil
}
