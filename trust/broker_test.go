package trust

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// deadline guards every wait in these tests against a hang; nothing waits for it to pass.
const deadline = 10 * time.Second

// startBroker runs the embedded broker in operator mode trusting chain, with every
// account on disk served from its resolver. It returns the client URL.
func startBroker(t *testing.T, chain *Chain) string {
	t.Helper()
	jwts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	return brokertest.StartOperator(t, chain.OperatorJWT(), chain.SystemAccount(), jwts).ClientURL()
}

// space is one provisioned space on a test broker.
type space struct {
	name string
	url  string
	acct *Account
	prov *conn // the provisioner
}

// newSpace creates the space's account in chain; provision it with provisionSpace once
// the broker runs.
func newSpace(t *testing.T, chain *Chain, name string) *space {
	t.Helper()
	acct, err := chain.Space(name)
	if err != nil {
		t.Fatal(err)
	}
	return &space{name: name, acct: acct}
}

// provisionSpace connects the provisioner and creates the space's streams and buckets.
func (sp *space) provisionSpace(t *testing.T, url string) {
	t.Helper()
	sp.url = url
	sp.prov = sp.dial(t, UserSpec{Name: "cotal up", Profile: ProfileProvisioner})
	if _, err := provision.Space(t.Context(), sp.prov.js, sp.name, provision.Options{}); err != nil {
		t.Fatal(err)
	}
}

// precreateDM makes p's bind-only DM durable, as cotal up does.
func (sp *space) precreateDM(t *testing.T, p protocol.Principal, uid string) string {
	t.Helper()
	name := protocol.ConsumerDM(p, uid)
	_, err := sp.prov.js.CreateConsumer(t.Context(), protocol.StreamDM(sp.name), jetstream.ConsumerConfig{
		Durable: name, FilterSubject: protocol.DMFilter(sp.name, p),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// precreateRole makes the role's shared anycast durable.
func (sp *space) precreateRole(t *testing.T, role string) {
	t.Helper()
	_, err := sp.prov.js.CreateConsumer(t.Context(), protocol.StreamTask(sp.name), jetstream.ConsumerConfig{
		Durable: protocol.ConsumerRole(role), FilterSubject: protocol.RoleFilter(sp.name, role),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mint writes a credential for spec to a 0600 file and returns its path and inbox prefix.
func (sp *space) mint(t *testing.T, spec UserSpec) (path, inbox string) {
	t.Helper()
	creds, err := sp.acct.Mint(spec)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	inbox, err = InboxPrefix(creds)
	if err != nil {
		t.Fatal(err)
	}
	return path, inbox
}

// conn is a test connection that records every asynchronous error the broker sends.
type conn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	inbox string // the credential's inbox prefix
	errs  chan error
}

// dial mints a credential for spec and connects with it.
func (sp *space) dial(t *testing.T, spec UserSpec, extra ...nats.Option) *conn {
	t.Helper()
	path, inbox := sp.mint(t, spec)
	c := &conn{inbox: inbox, errs: make(chan error, 1024)}
	nc, err := nats.Connect(sp.url, append(c.options(path, inbox), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// options are the connect options for a creds file: the credential, its inbox prefix and
// an error handler feeding c.errs.
func (c *conn) options(path, inbox string) []nats.Option {
	return []nats.Option{
		nats.UserCredentials(path), nats.CustomInboxPrefix(inbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case c.errs <- err:
			default: // a test that floods errors fails on the one it waits for
			}
		}),
	}
}

// waitViolation waits for the broker to refuse op ("Publish" or "Subscription") on
// subject with a permissions violation.
func (c *conn) waitViolation(t *testing.T, op, subject string) {
	t.Helper()
	want := op + ` to "` + subject + `"`
	timeout := time.After(deadline)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
				return
			}
		case <-timeout:
			t.Fatalf("no permissions violation for %s", want)
		}
	}
}

// pubRefused publishes on subject and waits for the broker to refuse it.
func (c *conn) pubRefused(t *testing.T, subject string) {
	t.Helper()
	if err := c.nc.Publish(subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	c.waitViolation(t, "Publish", subject)
}

// subRefused subscribes to subject and waits for the broker to refuse it.
func (c *conn) subRefused(t *testing.T, subject string) {
	t.Helper()
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }() // refused anyway
	c.waitViolation(t, "Subscription", subject)
}

// requestRefused runs op, a JetStream call that sends its request on subject, and
// checks the broker refused that request; once it has, op is cancelled and must fail.
func (c *conn) requestRefused(t *testing.T, subject string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	c.waitViolation(t, "Publish", subject)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("request on %s succeeded although the broker refused it", subject)
		}
	case <-time.After(deadline):
		t.Fatalf("request on %s did not end after cancel", subject)
	}
}

// noErrors checks that the broker sent c no error so far: after a flush round trip, an
// error for anything sent before it has been read (LastError is set as it is read; the
// handler runs later, so it is checked too for errors that came earlier).
func (c *conn) noErrors(t *testing.T) {
	t.Helper()
	if err := c.nc.FlushTimeout(deadline); err != nil {
		t.Fatal(err)
	}
	if err := c.nc.LastError(); err != nil {
		t.Fatalf("broker error: %v", err)
	}
	select {
	case err := <-c.errs:
		t.Fatalf("broker error: %v", err)
	default:
	}
}

// next waits for the next message on sub.
func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(deadline)
	if err != nil {
		t.Fatalf("no message on %s: %v", sub.Subject, err)
	}
	return m
}
