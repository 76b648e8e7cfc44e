package authsvc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// TestCalloutUsersGetTheSpaceLimits: a person admitted by the auth callout is held to the
// space's per-connection limits: the grant the callout signs carries them, and the broker
// refuses the subscription past the limit and a message over the payload limit.
func TestCalloutUsersGetTheSpaceLimits(t *testing.T) {
	lim := trust.Limits{Subs: 8, Payload: 4 << 10}.Over(trust.DefaultLimits())
	f := startLaneLimits(t, &lim)

	// What the authorizer grants carries the limits.
	x := f.exchange(t, "alice")
	store := bearer.FileStore{Dir: f.dir}
	issuer, err := bearer.LoadFrom(store, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := bearer.LoadOwnerSecretFrom(store)
	if err != nil {
		t.Fatal(err)
	}
	acl, err := f.Provisioner(testSpace).KeyValue(t.Context(), protocol.BucketACL(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	az := &authorizer{space: testSpace, chain: f.Chain, data: f.ua.DataAccount(), issuer: issuer, kv: f.kv, acl: acl,
		secret: secret, idpIssuer: testIdP, fence: newFence(), recorded: map[string]string{}}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	g, err := az.Authorize(t.Context(), &jwt.AuthorizationRequest{UserNkey: upub,
		ConnectOptions: jwt.ConnectOptions{Token: x.Token, Name: userauth.NewInboxName()}})
	if err != nil {
		t.Fatal(err)
	}
	if g.Limits.Subs != 8 || g.Limits.Payload != 4<<10 {
		t.Fatalf("granted limits: %+v, want subs 8 and payload 4096", g.Limits)
	}

	// The broker holds a callout-admitted connection to them.
	errs := make(chan error, 64)
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	nc, err := f.dialBearer(x.Owner, "alice", x.Token, onErr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := userauth.InboxPrefix(nc.Opts.Name)
	for i := range 9 {
		if _, err := nc.SubscribeSync(inbox + ".x" + string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	waitBrokerErr(t, nc, errs, "maximum subscriptions exceeded")

	// No reconnect: a reconnect after the broker closes the connection would clear the
	// error it closed it with.
	other, err := f.dialBearer(x.Owner, "alice", x.Token, onErr, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.Publish(inbox+".big", make([]byte, 8<<10))
	if errors.Is(err, nats.ErrMaxPayload) {
		// The broker already told this connection its limit (an INFO after the callout
		// admitted it carries the user's max_payload) and the client refused to send.
		if got := other.MaxPayload(); got != 4<<10 {
			t.Fatalf("client refused the payload, but the broker advertised max_payload %d, want 4096", got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Flush() // the oversized message reaches the broker now
	waitBrokerErr(t, other, errs, "maximum payload violation")
}

// waitBrokerErr waits for the broker to refuse something of nc with an error containing
// want (case-insensitive): through errs, or as the error it closed nc with.
func waitBrokerErr(t *testing.T, nc *nats.Conn, errs <-chan error, want string) {
	t.Helper()
	timeout := time.After(deadline)
	tick := time.NewTicker(20 * time.Millisecond) // re-reads LastError, set when the broker closes
	defer tick.Stop()
	for {
		select {
		case err := <-errs:
			if strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
		case <-tick.C:
			if err := nc.LastError(); err != nil && strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
		case <-timeout:
			t.Fatalf("the broker did not refuse with %q (last error %v)", want, nc.LastError())
		}
	}
}
