package authsvc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/oidc/oidctest"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// hostMesh is a broker with user-auth spaces, each provisioned, granting alice, and served
// by a delivery daemon (the plane oracle).
type hostMesh struct {
	*meshtest.Mesh
	t   *testing.T
	idp *oidctest.Issuer
	kv  map[string]jetstream.KeyValue
}

// addSpace enables, pushes, provisions and grants space, and starts its delivery daemon.
func (m *hostMesh) addSpace(space string) {
	t := m.t
	if _, err := Enable(m.Chain, space, m.idp.URL, "cotal"); err != nil {
		t.Fatal(err)
	}
	sysCreds, err := m.Chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := connect(m.URL, sysCreds, "test-push")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := trust.PushAccount(t.Context(), sys, m.Account(space).JWT()); err != nil {
		t.Fatal(err)
	}
	m.kv[space] = provisionSpace(t, m.Mesh, space)
	deliverytest.Serve(t, deliverytest.Lane(t, m.Mesh, space))
}

// dial exchanges alice's ID token at space's exchange and connects to space with its
// sentinel creds, or returns why not.
func (m *hostMesh) dial(space string) (*nats.Conn, exchangewire.Response, error) {
	st, err := ReadStatus(StateDir(m.Chain.Dir(), space))
	if err != nil {
		return nil, exchangewire.Response{}, err
	}
	idt, err := m.idp.IDToken("alice-sub")
	if err != nil {
		return nil, exchangewire.Response{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	x, err := (&userauth.Exchanger{URL: st.URL, Cap: st.Cap}).Exchange(ctx, exchangewire.Request{IDToken: idt, Actor: "alice"})
	if err != nil {
		return nil, exchangewire.Response{}, err
	}
	nc, err := m.dialWith(space, x)
	return nc, x, err
}

// dialWith connects to the broker with space's sentinel creds and bearer x.
func (m *hostMesh) dialWith(space string, x exchangewire.Response) (*nats.Conn, error) {
	ua, err := m.Chain.UserAuth(space)
	if err != nil {
		return nil, err
	}
	c, err := trust.ReadCreds(ua.SentinelCreds())
	if err != nil {
		return nil, err
	}
	ibx := userauth.NewInboxName()
	return nats.Connect(m.URL, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.Token(x.Token),
		nats.Name(ibx), nats.CustomInboxPrefix(userauth.InboxPrefix(ibx)), nats.Timeout(deadline), nats.NoReconnect()) // a hang guard: the callout answers under load too
}

// TestHost: one host process serves three user-auth spaces, each through its own callout
// and exchange, and retries a fourth whose state is missing until it appears. A bearer of
// one space never opens another. Kicking beta's plane connection fences beta alone: its
// lane reopens (reclaiming the plane through the oracle) while alpha and gamma keep
// authorizing. Removing gamma from the manifest closes it, and only then does
// <manifest>.applied name the new manifest.
func TestHost(t *testing.T) {
	m := &hostMesh{t: t, idp: oidctest.Start(t, &oidctest.Issuer{}), kv: map[string]jetstream.KeyValue{}}
	m.Mesh = meshtest.Start(t, "alpha")
	for _, s := range []string{"alpha", "beta", "gamma"} {
		m.addSpace(s)
	}

	manifest := filepath.Join(t.TempDir(), "spaces.json")
	write := func(doc string) {
		if err := os.WriteFile(manifest, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version": 2, "spaces": [{"space": "alpha"}, {"space": "beta"}, {"space": "gamma"}, {"space": "late"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	readyCh := make(chan spacehost.Ready, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{TrustDir: m.Chain.Dir(), Server: m.URL, Spaces: manifest,
			Logger: slog.New(spacehost.NewPrefixHandler(slog.NewTextHandler(testWriter{t}, nil)))},
			func(r spacehost.Ready) { readyCh <- r }, nil)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("host: %v", err)
			}
		case <-time.After(2 * deadline):
			t.Error("host did not stop")
		}
	})
	select {
	case r := <-readyCh:
		if !slices.Equal(r.Serving, []string{"alpha", "beta", "gamma"}) || !slices.Equal(r.RetryingNames(), []string{"late"}) {
			t.Fatalf("ready: serving %v, retrying %v", r.Serving, r.RetryingNames())
		}
	case err := <-done:
		t.Fatalf("host: %v", err)
	case <-time.After(2 * deadline):
		t.Fatal("host not ready")
	}

	bearers := map[string]exchangewire.Response{}
	ports := map[string]bool{}
	for _, s := range []string{"alpha", "beta", "gamma"} {
		nc, x, err := m.dial(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		nc.Close()
		bearers[s] = x
		st, _ := ReadStatus(StateDir(m.Chain.Dir(), s))
		ports[st.URL] = true
		// An agent of the space too: it exchanges the person's bearer at the same exchange.
		agent, err := (&userauth.Exchanger{URL: st.URL, Cap: st.Cap}).Exchange(t.Context(),
			exchangewire.Request{Owner: x.Owner, Actor: "alice", ActorToken: x.Token})
		if err != nil {
			t.Fatalf("%s agent exchange: %v", s, err)
		}
		if nc, err = m.dialWith(s, agent); err != nil {
			t.Fatalf("%s agent: %v", s, err)
		}
		nc.Close()
	}
	if len(ports) != 3 {
		t.Fatalf("three lanes share exchange URLs: %v", ports)
	}
	if nc, err := m.dialWith("beta", bearers["alpha"]); err == nil {
		nc.Close()
		t.Fatal("alpha's bearer opened beta")
	}

	// Kick beta's plane ledger connection; alpha and gamma keep authorizing throughout.
	sysCreds, err := m.Chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := connect(m.URL, sysCreds, "test-kicker")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	planeRow := func(space string) plane.Row {
		e, err := m.kv[space].Get(t.Context(), plane.Key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := plane.DecodeRow(e.Value())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := planeRow("beta")
	body := []byte(`{"cid":` + itoa(before.Ledger.CID) + `}`)
	if _, err := sys.Request("$SYS.REQ.SERVER."+before.Ledger.ServerID+".KICK", body, deadline); err != nil {
		t.Fatal(err)
	}
	kicked := time.Now()
	others := 0
	meshtest.Until(t, "beta reopened with a new plane generation", 30*time.Second, func() bool {
		for _, s := range []string{"alpha", "gamma"} {
			nc, err := m.dialWith(s, bearers[s])
			if err != nil {
				t.Fatalf("%s refused while beta was fenced: %v", s, err)
			}
			nc.Close()
			others++
		}
		r := planeRow("beta")
		return r.Generation > before.Generation && r.State == plane.StateHeld
	})
	t.Logf("beta reopened %s after the kick; %d connects to alpha and gamma meanwhile, all admitted", time.Since(kicked).Round(100*time.Millisecond), others)
	meshtest.Until(t, "beta serving again", deadline, func() bool {
		nc, _, err := m.dial("beta")
		if err == nil {
			nc.Close()
		}
		return err == nil
	})

	// The missing space appears: the host serves it at its next retry.
	m.addSpace("late")
	meshtest.Until(t, "late served", 20*time.Second, func() bool {
		nc, _, err := m.dial("late")
		if err == nil {
			nc.Close()
		}
		return err == nil
	})

	// Remove gamma: .applied names the new manifest only once gamma's lane is closed.
	next := `{"version": 2, "spaces": [{"space": "alpha"}, {"space": "beta"}, {"space": "late"}]}`
	write(next)
	want := spacehost.Hash([]byte(next))
	meshtest.Until(t, ".applied of the new manifest", 20*time.Second, func() bool {
		b, err := os.ReadFile(spacehost.AppliedPath(manifest))
		return err == nil && strings.TrimSpace(string(b)) == want
	})
	if _, err := ReadStatus(StateDir(m.Chain.Dir(), "gamma")); err == nil {
		t.Fatal(".applied changed while gamma's auth-service.json still exists")
	}
	if r := planeRow("gamma"); r.State != plane.StateReleased {
		t.Fatalf("gamma's plane after removal: %+v", r)
	}
	if nc, _, err := m.dial("alpha"); err != nil {
		t.Fatalf("alpha after gamma's removal: %v", err)
	} else {
		nc.Close()
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
