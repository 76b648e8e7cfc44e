package authsvc

import (
	"context"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/trust"
)

// TestPublicFace: a lane with a public face records its URL in auth-service.json and
// serves the discovery bundle there: the space, the broker, the IdP pin and the sentinel
// creds clients connect with.
func TestPublicFace(t *testing.T) {
	f := startLane(t)
	if err := f.stop(t); err != nil {
		t.Fatal(err)
	}
	lane := *f.lane
	lane.IdPClientID = "cotal"
	lane.Public = &exchange.PublicFace{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- lane.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("lane: %v", err)
	case <-time.After(deadline):
		t.Fatal("lane not ready")
	}
	st, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.PublicURL == "" || st.PublicURL == st.URL {
		t.Fatalf("status: public URL %q (exchange %q)", st.PublicURL, st.URL)
	}
	b, err := exchangewire.FetchBundle(t.Context(), st.PublicURL)
	if err != nil {
		t.Fatal(err)
	}
	if b.Space != testSpace || b.Server != f.URL || b.UserAuth.IdP.Issuer != testIdP || b.UserAuth.IdP.Audience != "cotal" ||
		b.UserAuth.Endpoints.URL != st.PublicURL {
		t.Fatalf("bundle: %+v, want space %s, server %s, endpoints %s", b, testSpace, f.URL, st.PublicURL)
	}
	got, err := trust.ReadCreds([]byte(b.SentinelCreds))
	if err != nil {
		t.Fatal(err)
	}
	want, err := trust.ReadCreds(f.ua.SentinelCreds())
	if err != nil {
		t.Fatal(err)
	}
	if got.Seed != want.Seed || got.Name != want.Name {
		t.Fatalf("bundle sentinel %s, want %s", got.Name, want.Name)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
