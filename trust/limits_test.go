package trust

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// TestFullSpaceRefusesWritesAndKeepsWhatItStored: a space whose account may store 256 KiB
// takes DMs (to a peer who exists and to one nobody holds) until the broker refuses the
// next write; every DM it acknowledged reads back intact, and the space takes writes
// again once a larger limit is pushed to the running broker.
func TestFullSpaceRefusesWritesAndKeepsWhatItStored(t *testing.T) {
	chain := mustOpen(t, t.TempDir())
	small := Limits{Storage: 256 << 10}.Over(DefaultLimits())
	if _, changed, err := chain.SetLimits("alpha", small); err != nil || !changed {
		t.Fatalf("set limits: changed %v, %v", changed, err)
	}
	sp := newSpace(t, chain, "alpha")
	sp.provisionSpace(t, startBroker(t, chain))
	sp.precreateDM(t, bob, uidB)
	a := sp.dial(t, agentSpec(alice, uidA, nil, nil))

	ghost := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ghost"} // nobody holds it
	stored := map[uint64]string{}
	var refused error
	for i := 0; i < 1000 && refused == nil; i++ {
		to := bob
		if i%2 == 1 {
			to = ghost
		}
		body := fmt.Sprintf("%04d %s", i, strings.Repeat("x", 4<<10))
		ack, err := a.js.Publish(t.Context(), protocol.InstSubject(sp.name, to, alice), []byte(body))
		if err != nil {
			refused = err
			break
		}
		stored[ack.Sequence] = body
	}
	if refused == nil {
		t.Fatal("1000 DMs of 4 KiB fit in a 256 KiB space")
	}
	if !spaceFull(refused) {
		t.Fatalf("the refusal %v is not the space's storage limit", refused)
	}
	if len(stored) < 10 {
		t.Fatalf("only %d DMs were stored before the refusal", len(stored))
	}
	t.Logf("stored %d DMs, then: %v", len(stored), refused)

	// Nothing acknowledged is lost: each stored DM reads back, byte for byte.
	dm, err := sp.prov.js.Stream(t.Context(), protocol.StreamDM(sp.name))
	if err != nil {
		t.Fatal(err)
	}
	if n := dm.CachedInfo().State.Msgs; n != uint64(len(stored)) {
		t.Fatalf("DM stream holds %d messages, %d were acknowledged", n, len(stored))
	}
	for seq, body := range stored {
		m, err := dm.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("stored DM %d: %v", seq, err)
		}
		if string(m.Data) != body {
			t.Fatalf("stored DM %d changed", seq)
		}
	}

	// A larger limit, pushed to the running broker, lets the space write again.
	acct, changed, err := chain.SetLimits("alpha", Limits{Storage: 4 << 20}.Over(small))
	if err != nil || !changed {
		t.Fatalf("raise the limit: changed %v, %v", changed, err)
	}
	sys := sysConn(t, chain, sp.url)
	if err := PushAccount(t.Context(), sys, acct.JWT()); err != nil {
		t.Fatal(err)
	}
	deadlineAt := time.Now().Add(deadline)
	for {
		_, err := a.js.Publish(t.Context(), protocol.InstSubject(sp.name, bob, alice), []byte("after"))
		if err == nil {
			break
		}
		if !spaceFull(err) || time.Now().After(deadlineAt) {
			t.Fatalf("a write after the limit was raised: %v", err)
		}
	}
}

// spaceFull reports whether err is the broker's refusal of a write past the account's
// storage limit (JetStream error 10002, resource limits exceeded for account).
func spaceFull(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == 10002
}

// sysConn connects to url as the chain's system account.
func sysConn(t *testing.T, chain *Chain, url string) *nats.Conn {
	t.Helper()
	creds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(c.JWT, c.Seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestUserLimitsAreWhatTheBrokerEnforces: a minted credential carries the space's
// per-connection limits, and the broker holds a connection to them: the subscription past
// the limit is refused, and so is a message over the payload limit.
func TestUserLimitsAreWhatTheBrokerEnforces(t *testing.T) {
	chain := mustOpen(t, t.TempDir())
	lim := Limits{Subs: 8, Payload: 4 << 10}.Over(DefaultLimits())
	if _, _, err := chain.SetLimits("alpha", lim); err != nil {
		t.Fatal(err)
	}
	sp := newSpace(t, chain, "alpha")
	sp.provisionSpace(t, startBroker(t, chain))

	creds, err := sp.acct.Mint(agentSpec(alice, uidA, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Limits.Subs != 8 || uc.Limits.Payload != 4<<10 {
		t.Fatalf("minted limits: subs %d payload %d, want 8 and 4096", uc.Limits.Subs, uc.Limits.Payload)
	}

	a := sp.dial(t, agentSpec(alice, uidA, nil, nil))
	own := a.inbox + ".x"
	for i := range 8 {
		if _, err := a.nc.SubscribeSync(fmt.Sprintf("%s%d", own, i)); err != nil {
			t.Fatal(err)
		}
	}
	a.noErrors(t)
	if _, err := a.nc.SubscribeSync(own + "9"); err != nil {
		t.Fatal(err)
	}
	waitErr(t, a, "maximum subscriptions exceeded")

	// No reconnect: a reconnect after the broker closes the connection would clear the
	// error it closed it with before waitErr reads it.
	b := sp.dial(t, agentSpec(bob, uidB, nil, nil), nats.NoReconnect())
	err = b.nc.Publish(b.inbox+".x", make([]byte, 8<<10))
	if errors.Is(err, nats.ErrMaxPayload) {
		// The broker may already have told this connection its limit (an INFO sent after
		// the connection authenticated carries the user's max_payload), and the client
		// refuses before sending: the limit is still the broker's.
		if got := b.nc.MaxPayload(); got != 4<<10 {
			t.Fatalf("client refused the payload locally, but the broker advertised max_payload %d, want 4096", got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = b.nc.Flush() // the oversized message reaches the broker now, not with the next flush
	waitErr(t, b, "maximum payload violation")
}

// waitErr waits for the broker to send c an error containing want (case-insensitive):
// through the error handler, or as the error it closed the connection with.
func waitErr(t *testing.T, c *conn, want string) {
	t.Helper()
	timeout := time.After(deadline)
	tick := time.NewTicker(20 * time.Millisecond) // re-reads LastError, set when the broker closes
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if err := c.nc.LastError(); err != nil && strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
		case err := <-c.errs:
			if strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
			t.Logf("broker error: %v", err)
		case <-timeout:
			t.Fatalf("the broker did not refuse with %q (last error %v)", want, c.nc.LastError())
		}
	}
}

// TestSetLimits: a new account has the defaults; SetLimits re-signs it with the same keys
// (a credential minted before still connects) and says when nothing changed; an account
// made before limits existed is unlimited and marked as such; bad limits change nothing.
func TestSetLimits(t *testing.T) {
	chain := mustOpen(t, t.TempDir())
	acct, err := chain.Space("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if l, set := acct.Limits(); !set || l != DefaultLimits() {
		t.Fatalf("a new account's limits: %v (set %v), want the defaults", l, set)
	}
	if _, changed, err := chain.SetLimits("alpha", DefaultLimits()); err != nil || changed {
		t.Fatalf("the same limits again: changed %v, %v", changed, err)
	}
	lim := Limits{Storage: 2 << 30, Conns: Unlimited}.Over(DefaultLimits())
	again, changed, err := chain.SetLimits("alpha", lim)
	if err != nil || !changed || again.PublicKey() != acct.PublicKey() || again.SigningKey() != acct.SigningKey() {
		t.Fatalf("set limits: changed %v, %v; keys kept: %v", changed, err, again.PublicKey() == acct.PublicKey())
	}
	reopened, err := mustOpen(t, chain.Dir()).Space("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := reopened.Limits(); l != lim {
		t.Fatalf("limits on disk: %v, want %v", l, lim)
	}
	for _, bad := range []Limits{Limits{Storage: -5}.Over(lim), Limits{Payload: 1 << 40}.Over(lim)} {
		if _, _, err := chain.SetLimits("alpha", bad); err == nil {
			t.Errorf("limits %v accepted", bad)
		}
	}
	if l, _ := reopened.Limits(); l != lim {
		t.Fatalf("a refused change changed the limits: %v", l)
	}
}

// TestParseSize reads sizes as flags and the manifest write them.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "1500": 1500,
		"10KB": 10_000, "unlimited": Unlimited, " 3 MiB ": 3 << 20,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "1.5GiB", "GiB", "lots", "99999999999TiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	// A number past what a limit holds says so and names the largest, in the unit given.
	for in, want := range map[string]string{
		"99999999999999999999GB": `size "99999999999999999999GB": too large: the largest is 9223372036GB, or unlimited`,
		"9999999999GB":           `size "9999999999GB": too large: the largest is 9223372036GB, or unlimited`,
		"99999999999TiB":         `size "99999999999TiB": too large: the largest is 8388607TiB, or unlimited`,
		"99999999999999999999":   `size "99999999999999999999": too large: the largest is 9223372036854775807, or unlimited`,
	} {
		if _, err := ParseSize(in); err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q) = %v; want %s", in, err, want)
		}
	}
	if _, err := ParseSize("-99999999999999999999GB"); err == nil || !strings.Contains(err.Error(), "want a positive whole number") {
		t.Errorf("ParseSize of a huge negative = %v", err)
	}
	if _, err := ParseCount("99999999999999999999"); err == nil || !strings.Contains(err.Error(), "too large: the largest is 9223372036854775807") {
		t.Errorf("ParseCount of a huge count = %v", err)
	}
	if s := FormatSize(1 << 30); s != "1GiB" {
		t.Errorf("FormatSize(1GiB) = %s", s)
	}
}
