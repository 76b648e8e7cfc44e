package callout

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
)

// TestRunAnswersConcurrently: Run answers a second request while the first is still being
// decided (an authorizer waiting on its ledger, say): the authorizer here grants only
// once two requests are inside it at once, which a one-at-a-time responder never reaches
// (its first request runs out of the authorization timeout and is refused). Two clients
// connect at once; the broker waits 5 s for an answer, the authorizer 4 s for company.
func TestRunAnswersConcurrently(t *testing.T) {
	b := startCalloutBrokerWaiting(t, 5)
	k := b.keys
	var inFlight atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	az := AuthorizerFunc(func(ctx context.Context, req *jwt.AuthorizationRequest) (Grant, error) {
		if inFlight.Add(1) >= 2 {
			once.Do(func() { close(both) })
		}
		defer inFlight.Add(-1)
		select {
		case <-both:
			return testAuthorizer().Authorize(ctx, req)
		case <-ctx.Done():
			return Grant{}, errors.New("answered alone")
		}
	})
	r, err := New(Config{
		Authorizer: az, XKey: k.xkey,
		CalloutAccount: b.authPub, CalloutSigner: k.calloutSK,
		DataAccount: b.dataPub, DataSigner: k.dataSK,
		Timeout: 4 * time.Second, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	startResponder(t, b, r)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			nc, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good"))
			if err != nil {
				t.Errorf("connect %d: %v", i, err)
				return
			}
			nc.Close()
		})
	}
	wg.Wait()
}
