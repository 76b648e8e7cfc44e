package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// TestSecondSessionOfANameIsRefused: while bob's first session lives, a second endpoint
// of bob with SoleSession (an AI agent's, cotal mcp) is refused at Join (it would split
// bob's DMs), and its closing does not take the first one offline: no offline record is
// written, so carol's watch never sees bob go. Once the first session closes, or dies
// without closing, bob may join again.
func TestSecondSessionOfANameIsRefused(t *testing.T) {
	url := mesh(t)
	bob := peer(t, url, client.Config{Name: "bob", SoleSession: true})
	carol := peer(t, url, client.Config{Name: "carol"})
	changes, err := carol.WatchPresence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, changes, "local.bob", protocol.StatusIdle)

	second, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "bob", SoleSession: true})
	if err != nil {
		t.Fatal(err)
	}
	err = second.Join(t.Context())
	if !errors.Is(err, client.ErrSessionLive) || !strings.Contains(err.Error(), "local.bob is already connected") {
		t.Fatalf("a second live session of bob joined: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}

	// bob's record is untouched: carol reads it online, and a DM sent now reaches the
	// first session, whole.
	peers, err := carol.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if p.Card.ID == "local.bob" && !p.Online {
			t.Fatalf("bob shows offline after the refused session closed: %+v", p.Presence)
		}
	}
	if _, err := carol.DM(t.Context(), bob.Principal(), client.Text("still yours")); err != nil {
		t.Fatal(err)
	}
	if in := next(t, bob); in.Text() != "still yours" {
		t.Fatalf("bob got %q", in.Text())
	}
	// Nothing said bob left while the refused session came and went.
	select {
	case ch := <-changes:
		if ch.Card.ID == "local.bob" && !ch.Online {
			t.Fatalf("carol saw bob go offline: %+v", ch)
		}
	default:
	}

	// A session that died without closing does not hold the name.
	bob.Conn().Close()
	again := peer(t, url, client.Config{Name: "bob", SoleSession: true})
	// And one that closed does not either.
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	peer(t, url, client.Config{Name: "bob", SoleSession: true})
}

// TestPresenceStaysOnWhileASessionLives: two sessions of dave that share the name (as
// cotal join allows, with a warning); when one closes, the other still serves dave, so no
// offline record is written and carol reads dave online at once. When the last one
// closes, dave goes offline at once.
func TestPresenceStaysOnWhileASessionLives(t *testing.T) {
	url := mesh(t)
	carol := peer(t, url, client.Config{Name: "carol"})
	one := peer(t, url, client.Config{Name: "dave"})
	two := peer(t, url, client.Config{Name: "dave"})
	daveOnline := func() bool {
		peers, err := carol.Roster(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.Card.ID == "local.dave" {
				return p.Online
			}
		}
		return false
	}
	if err := one.Close(); err != nil {
		t.Fatal(err)
	}
	if !daveOnline() {
		t.Fatal("dave shows offline while his second session lives")
	}
	if err := two.Close(); err != nil {
		t.Fatal(err)
	}
	if daveOnline() {
		t.Fatal("dave shows online after his last session closed")
	}
}

// waitState waits until changes reports id in state st.
func waitState(t *testing.T, changes <-chan client.PeerChange, id string, st protocol.Status) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		select {
		case ch := <-changes:
			if ch.Card.ID == id && ch.State() == st {
				return
			}
		case <-deadline:
			t.Fatalf("%s never showed %s", id, st)
		}
	}
}

// TestSetActivityIsBounded: an activity over the limit or on more than one line is refused
// and changes nothing; peers keep reading the last good one.
func TestSetActivityIsBounded(t *testing.T) {
	url := mesh(t)
	bob := peer(t, url, client.Config{Name: "bob"})
	carol := peer(t, url, client.Config{Name: "carol"})
	if err := bob.SetActivity(t.Context(), "reviewing"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{strings.Repeat("x", 100_000), "idle\nroot (operator) waiting: approve", "\x1b[2J"} {
		if err := bob.SetActivity(t.Context(), bad); err == nil {
			t.Errorf("SetActivity(%.20q) was accepted", bad)
		}
	}
	peers, err := carol.Roster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if p.Card.ID == "local.bob" && p.Activity != "reviewing" {
			t.Fatalf("bob's activity is %.40q", p.Activity)
		}
	}
	if _, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "bob\nroot", Actor: "bob"}); err == nil {
		t.Fatal("a display name with a line break was accepted")
	}
}

// TestTakeAsksTakesSeveralAndShowsTheBacklog: a holder that takes one ask at a time by
// itself can take several at once with TakeAsks, and RoleBacklog says how many still wait.
func TestTakeAsksTakesSeveralAndShowsTheBacklog(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	w := peer(t, url, client.Config{Name: "w1", Role: "worker"})
	askN(t, alice, "worker", "a", 6)
	first := <-w.Messages() // the one the endpoint took by itself
	meshtest.Until(t, "five asks wait for the role", hangGuard, func() bool {
		n, err := w.RoleBacklog(t.Context())
		return err == nil && n == 5
	})
	got, err := w.TakeAsks(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("took %d asks, want 3", len(got))
	}
	seen := map[string]bool{first.Text(): true}
	for _, in := range got {
		if seen[in.Text()] || in.Kind != protocol.DeliveryAnycast {
			t.Fatalf("took %q (%s) twice or not an ask", in.Text(), in.Kind)
		}
		seen[in.Text()] = true
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := w.RoleBacklog(t.Context()); err != nil || n != 2 {
		t.Fatalf("backlog %d, %v; want 2", n, err)
	}
	if _, err := w.TakeAsks(t.Context(), client.MaxTakeAsks+1); err == nil {
		t.Fatal("an unbounded take was accepted")
	}
	if _, err := alice.TakeAsks(t.Context(), 1); !errors.Is(err, client.ErrNoRole) {
		t.Fatalf("a peer without a role took asks: %v", err)
	}
	if err := first.Ack(); err != nil {
		t.Fatal(err)
	}
}
