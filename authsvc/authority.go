package authsvc

import (
	"context"
	"errors"
	"fmt"
	"github.com/cotal-ai/cotal/client"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// ErrFenced is wrapped by the error of a lane that lost one of its broker connections
// mid-life: from that instant it authorized nothing more, and it must be started again
// (a host reopens it).
var ErrFenced = errors.New("fenced")

// Bounds of the plane claim's release at close: each attempt, and all of them.
const (
	releaseAttempt = 3 * time.Second
	releaseTimeout = 10 * time.Second
)

// planePrincipal is the principal of the authority plane's connections: the one the
// delivery daemon's liveness oracle sees on its privileged rail.
func planePrincipal() protocol.Principal {
	return protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_auth_service"}
}

// fence records the first lost connection of a lane and wakes whoever waits for it.
type fence struct {
	once sync.Once
	lost chan struct{}
	mu   sync.Mutex
	why  string
}

func newFence() *fence { return &fence{lost: make(chan struct{})} }

// trip fences the lane (the first call wins).
func (f *fence) trip(why string) {
	f.once.Do(func() {
		f.mu.Lock()
		f.why = why
		f.mu.Unlock()
		close(f.lost)
	})
}

// tripped reports whether the lane is fenced.
func (f *fence) tripped() bool {
	select {
	case <-f.lost:
		return true
	default:
		return false
	}
}

// err is the lane's error once fenced.
func (f *fence) err(space string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Errorf("auth service of space %q lost its %s and %w: it authorizes nothing more and must be restarted", space, f.why, ErrFenced)
}

// watched are the connect options of a connection whose loss fences the lane: it never
// reconnects (a reconnect would change the connection the plane claim names).
func (f *fence) watched(what string) []nats.Option {
	return []nats.Option{
		nats.NoReconnect(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				f.trip(fmt.Sprintf("%s connection (%v)", what, err))
				return
			}
			f.trip(what + " connection")
		}),
		nats.ClosedHandler(func(*nats.Conn) { f.trip(what + " connection") }),
	}
}

// authority is a lane's authority plane: one privileged data-account connection, signed
// with the data account's signing key (it never passes through the callout), and the plane
// claim. The connection reads the ledger, records grants, holds the claim and asks the
// oracle; the claim names it in both of its tuples (ledger and records): the row keeps the
// reference's two-tuple shape, and a successor's oracle finds both gone exactly when this
// one connection is. Its loss fences the lane, as the loss of either of two would.
type authority struct {
	nc    *nats.Conn
	kv    jetstream.KeyValue // the ledger bucket, which also holds the plane claim
	acl   jetstream.KeyValue // the delivery daemon's ACL bucket: grants recorded
	claim *plane.Claim
}

// openAuthority opens the plane's connection, finds the ledger bucket and takes the
// plane claim. On error everything it opened is closed. A connection lost later trips f.
func (l *Lane) openAuthority(ctx context.Context, data *trust.Account, f *fence, log *slog.Logger) (*authority, error) {
	creds, err := data.Mint(trust.UserSpec{Name: "cotal-auth-service", Profile: trust.ProfileProvisioner, Principal: planePrincipal()})
	if err != nil {
		return nil, err
	}
	c, err := trust.ReadCreds(creds)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed([]byte(c.Seed))
	if err != nil {
		return nil, fmt.Errorf("plane key: %w", err)
	}
	userNkey, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("plane key: %w", err)
	}
	a := &authority{}
	ok := false
	defer func() {
		if !ok {
			a.close(log)
		}
	}()
	if a.nc, err = connect(l.Server, creds, "cotal:auth-service:"+l.Space+":plane", append(client.TLSOptions(l.TLSCA), f.watched("plane")...)...); err != nil {
		return nil, fmt.Errorf("data account: %w", err)
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	kctx, cancel := context.WithTimeout(ctx, connectTimeout)
	a.kv, err = js.KeyValue(kctx, provision.BucketAuth(l.Space))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ledger bucket %s (is the space provisioned?): %w", provision.BucketAuth(l.Space), err)
	}
	kctx, cancel = context.WithTimeout(ctx, connectTimeout)
	a.acl, err = js.KeyValue(kctx, protocol.BucketACL(l.Space))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ACL bucket %s (is the space provisioned?): %w", protocol.BucketACL(l.Space), err)
	}
	tuple, err := plane.ConnTuple(a.nc, userNkey)
	if err != nil {
		return nil, err
	}
	oracle := l.Oracle
	if oracle == nil {
		oracle = &plane.DaemonOracle{Conn: a.nc, Space: l.Space, From: planePrincipal()}
	}
	claimer := &plane.Claimer{Space: l.Space, KV: a.kv, Oracle: oracle, Ledger: tuple, Records: tuple, Logger: log}
	if a.claim, err = claimer.Acquire(ctx); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// close releases the claim while the plane still stands (a fenced lane's plane
// connection is gone, so its claim stays held until a successor's oracle finds it gone),
// then closes the connection.
func (a *authority) close(log *slog.Logger) {
	if a.claim != nil {
		a.releaseClaim(log)
	}
	if a.nc != nil {
		a.nc.Close()
	}
}

// releaseClaim releases the plane claim. A release the broker refuses is retried every
// second for up to releaseTimeout, the lane's close not confirmed meanwhile; a claim
// another holder took, or the plane connection lost, ends the attempts (a successor then
// reclaims through the oracle).
func (a *authority) releaseClaim(log *slog.Logger) {
	end := time.Now().Add(releaseTimeout)
	for a.nc != nil && a.nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseAttempt)
		err := a.claim.Release(ctx)
		cancel()
		if err == nil {
			log.Info("plane claim released")
			return
		}
		if plane.Refused(err, plane.ReasonLost) || !time.Now().Add(time.Second).Before(end) {
			log.Warn("plane claim not released", "err", err)
			return
		}
		log.Warn("plane claim not released; retrying before the close is confirmed", "err", err)
		time.Sleep(time.Second)
	}
}

// enroller makes a principal's footprint ready before its bearer is issued: its lifecycle
// uid (Chain.Identity) and its bind-only DM (and role) durables and public-bucket watchers,
// created through the plane's connection, so a client needs no key of the space to
// join. Principals already enrolled with the same uid and role are not asked again for the
// durables; the watchers are ensured at every exchange, as the reference's exchange does,
// because an agent may delete its own when it stops.
func (l *Lane) enroller(a *authority) func(ctx context.Context, p protocol.Principal, role string) (string, error) {
	var mu sync.Mutex
	done := map[string]bool{}
	return func(ctx context.Context, p protocol.Principal, role string) (string, error) {
		uid, err := l.Chain.Identity(l.Space, p.Actor)
		if err != nil {
			return "", err
		}
		js, err := jetstream.New(a.nc)
		if err != nil {
			return "", fmt.Errorf("jetstream: %w", err)
		}
		key := p.String() + "\x00" + uid + "\x00" + role
		mu.Lock()
		ok := done[key]
		mu.Unlock()
		if ok {
			if _, err := provision.KVWatches(ctx, js, l.Space, p, uid); err != nil {
				return "", err
			}
			return uid, nil
		}
		if _, err := provision.Agent(ctx, js, l.Space, p, uid, role); err != nil {
			return "", err
		}
		mu.Lock()
		done[key] = true
		mu.Unlock()
		return uid, nil
	}
}
