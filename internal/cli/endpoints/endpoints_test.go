package endpoints

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
)

func TestNewCmdEndpoints(t *testing.T) {
	for _, c := range []struct {
		args  []string
		space string
		json  bool
		err   string
	}{
		{args: nil},
		{args: []string{"--json", "--space", "review"}, space: "review", json: true},
		{args: []string{"--space", "no spaces"}, err: "--space"},
		{args: []string{"extra"}, err: "unknown command"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmdEndpoints(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || got.Mesh.Space != c.space || got.JSON != c.json {
			t.Errorf("%q: opts %+v, err %v", c.args, got, err)
		}
	}
}

// TestKindOf classifies presence records by what their cards say.
func TestKindOf(t *testing.T) {
	card := func(id, name, kind string, meta map[string]any) client.Peer {
		return client.Peer{Presence: protocol.Presence{Card: protocol.AgentCard{ID: id, Name: name, Kind: kind, Meta: meta}}}
	}
	for want, p := range map[string]client.Peer{
		KindManager: card("local.manager", "manager", protocol.CardEndpoint, map[string]any{"service": protocol.ManagerServiceName}),
		KindConsole: card("local.console_12", "console", protocol.CardEndpoint, nil),
		KindService: card("local.svc", "svc", protocol.CardEndpoint, map[string]any{"service": "search"}),
		KindPerson:  card("local.alice", "alice", protocol.CardEndpoint, nil),
		KindAgent:   card("local.bob", "bob", protocol.CardAgent, map[string]any{"connector": "claude"}),
	} {
		if got := kindOf(p); got != want {
			t.Errorf("%s: kind %s, want %s", p.Card.ID, got, want)
		}
	}
	// A person named console is a person: the kind is not taken from a name alone.
	if got := kindOf(card("local.mallory", "console", protocol.CardEndpoint, nil)); got != KindPerson {
		t.Errorf("a person named console: %s", got)
	}
}
