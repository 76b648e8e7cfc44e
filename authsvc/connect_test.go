package authsvc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust/trusttest"
	"github.com/cotal-ai/cotal/userauth"
)

// TestUserAuthConnect signs in the way an embedder does, with userauth.Connect and no
// CLI: the person's ID token buys a bearer of the actor at the lane's exchange, the
// endpoint connects as that principal and may post; an actor without a grant is refused
// at the exchange; a broker that refuses the sentinel is a *userauth.ConnectError.
func TestUserAuthConnect(t *testing.T) {
	f := startLane(t)
	opts := func(actor string) userauth.ConnectOptions { return f.userOptions(t, actor) }

	ep, err := userauth.Connect(t.Context(), opts("alice"))
	if err != nil {
		t.Fatalf("connect as alice: %v", err)
	}
	defer ep.Close()
	want := f.exchange(t, "alice").Owner
	if p := ep.Principal(); p.Actor != "alice" || p.Owner != want {
		t.Fatalf("connected as %s, want %s.alice", p, want)
	}
	if _, err := ep.Post(t.Context(), "general", client.Text("signed in with the SDK")); err != nil {
		t.Fatalf("post as alice: %v", err)
	}

	_, err = userauth.Connect(t.Context(), opts("mallory"))
	if !errors.Is(err, userauth.ErrRefused) {
		t.Fatalf("connect as an actor without a grant: %v, want userauth.ErrRefused", err)
	}
	if _, ok := errors.AsType[*userauth.ConnectError](err); ok {
		t.Fatalf("an exchange refusal reads as a broker failure: %v", err)
	}

	if _, err := userauth.Connect(t.Context(), opts("not.an.actor")); err == nil || !strings.Contains(err.Error(), "not an actor name") {
		t.Fatalf("connect as not.an.actor: %v, want a refusal naming the actor", err)
	}

	foreign := opts("alice")
	foreign.SentinelCreds = []byte(trusttest.SentinelCreds(t)) // another chain's sentinel
	_, err = userauth.Connect(t.Context(), foreign)
	ce, ok := errors.AsType[*userauth.ConnectError](err)
	if !ok || !errors.Is(err, nats.ErrAuthorization) || ce.Principal.Actor != "alice" || ce.Space != testSpace {
		t.Fatalf("connect with a foreign sentinel: %v, want a *userauth.ConnectError wrapping nats.ErrAuthorization", err)
	}
}

// userOptions signs actor in at the lane's exchange with the fake provider's ID token and
// connects with the lane's sentinel, as an embedder calling userauth.Connect does.
func (f *laneFixture) userOptions(t *testing.T, actor string) userauth.ConnectOptions {
	t.Helper()
	st, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return userauth.ConnectOptions{
		Server:        f.URL,
		Space:         testSpace,
		Exchanger:     &userauth.Exchanger{URL: st.URL, Cap: st.Cap},
		SentinelCreds: f.ua.SentinelCreds(),
		IDToken:       func(context.Context) (string, error) { return "idtok", nil },
		Config:        client.Config{Actor: actor},
	}
}
