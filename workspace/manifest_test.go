package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cliManifest is the example of cli.md §6.2.
const cliManifest = `apiVersion: cotal/v1
kind: Mesh
space: main
agent: claude
agents:
  planner: ./agents/planner.md            # bare path
  builder:                                # file + overrides
    persona: ./agents/builder.md
    model: sonnet
    cwd: repos/backend                    # on the manager host, relative to its workspace
    role: implementer
    instructions: Prefer the smallest change that works.
  lead:                                   # inline: needs model or instructions
    model: opus
    capabilities: [spawn]
    instructions: Coordinate the team.    # system prompt
    prompt: Assign the first task.        # kickoff turn
channels:
  general:
    subscribe:    [planner, builder, lead]
    allowPublish: [planner, builder, lead]
  review:
    description: Code review
    subscribe:      [planner]
    allowSubscribe: [planner, builder]    # ⊇ subscribe
    allowPublish:   [planner, builder]    # default-deny
`

// head is the required top of a manifest, three lines long.
const head = "apiVersion: cotal/v1\nkind: Mesh\nspace: main\n"

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest("cotal.yaml", []byte(cliManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Space != "main" || m.Agent != "claude" || m.PersonaPermissions != PersonaReject || m.Broker.Auth != AuthStatic || m.Path != "cotal.yaml" {
		t.Fatalf("top level: %+v", m)
	}
	var names []string
	for _, a := range m.Agents {
		names = append(names, a.Name)
	}
	if !reflect.DeepEqual(names, []string{"builder", "lead", "planner"}) {
		t.Fatalf("agents %v", names)
	}
	b, ok := m.AgentNamed("builder")
	if !ok || b.Persona != "./agents/builder.md" || b.Model != "sonnet" || b.Cwd != "repos/backend" || b.Role != "implementer" ||
		b.Instructions != "Prefer the smallest change that works." || b.Line != 7 {
		t.Fatalf("builder %+v", b)
	}
	if lead, _ := m.AgentNamed("lead"); lead.Persona != "" || lead.Prompt != "Assign the first task." || !reflect.DeepEqual(lead.Capabilities, []string{"spawn"}) {
		t.Fatalf("lead %+v", lead)
	}
	if p, _ := m.AgentNamed("planner"); p.Persona != "./agents/planner.md" || p.Line != 6 {
		t.Fatalf("planner %+v", p)
	}
	if len(m.Channels) != 2 || m.Channels[1].Name != "review" || m.Channels[1].Description != "Code review" || m.Channels[1].Line != 22 {
		t.Fatalf("channels %+v", m.Channels)
	}
	want := map[string]AgentAccess{
		"planner": {Subscribe: []string{"general", "review"}, AllowSubscribe: []string{"general", "review"}, AllowPublish: []string{"general", "review"}},
		"builder": {Role: "implementer", Subscribe: []string{"general"}, AllowSubscribe: []string{"general", "review"}, AllowPublish: []string{"general", "review"}},
		"lead":    {Subscribe: []string{"general"}, AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}},
	}
	if got := m.Access(); !reflect.DeepEqual(got, want) {
		t.Fatalf("access\n got %+v\nwant %+v", got, want)
	}
}

func TestParseManifestFull(t *testing.T) {
	in := head + `broker:
  servers: nats://127.0.0.1:4333, tls://mesh.example.com:4222
  host: 0.0.0.0
  auth: false
runtime: pty
personaPermissions: include
defaults: {replay: true, replayWindow: 7d, deliveryClass: durable}
agents:
  a:
    persona: a.md
    agent: codex
    variant: high
    description: the a
    continuity: exact
    personaPermissions: reject
    launchOptions: {sandbox: workspace-write, depth: 2}
    capabilities: [run, role:reviewer]
channels:
  quiet: ~
  logs:
    replay: false
    replayWindow: 15m
    deliveryClass: live
    instructions: Read only.
    allowSubscribe: [a, a]
  team.backend:
    subscribe: [a]
`
	m, err := ParseManifest("m.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Broker, ManifestBroker{Servers: []string{"nats://127.0.0.1:4333", "tls://mesh.example.com:4222"}, Host: "0.0.0.0", Auth: AuthOpen}) {
		t.Fatalf("broker %+v", m.Broker)
	}
	if m.Runtime != "pty" || m.PersonaPermissions != PersonaInclude || *m.Defaults.Replay != true || m.Defaults.ReplayWindow != "7d" || m.Defaults.DeliveryClass != DeliveryDurable {
		t.Fatalf("top %+v", m)
	}
	a := m.Agents[0]
	if a.Agent != "codex" || a.Variant != "high" || a.Continuity != "exact" || a.PersonaPermissions != PersonaReject ||
		a.LaunchOptions["sandbox"] != "workspace-write" || a.LaunchOptions["depth"] != 2 || a.Description != "the a" {
		t.Fatalf("agent %+v", a)
	}
	logs := m.Channels[0]
	if logs.Name != "logs" || *logs.Replay || logs.ReplayWindow != "15m" || logs.DeliveryClass != DeliveryLive ||
		!reflect.DeepEqual(logs.AllowSubscribe, []string{"a"}) || logs.Instructions != "Read only." {
		t.Fatalf("logs %+v", logs)
	}
	if q := m.Channels[1]; q.Name != "quiet" || q.Subscribe != nil {
		t.Fatalf("quiet %+v", q)
	}
	acc := m.Access()["a"]
	if !reflect.DeepEqual(acc, AgentAccess{Subscribe: []string{"team.backend"}, AllowSubscribe: []string{"logs", "team.backend"}}) {
		t.Fatalf("access %+v", acc)
	}
	for _, tt := range []struct{ auth, want string }{{"true", AuthStatic}, {"static", AuthStatic}, {"user", AuthUser}, {"~", AuthStatic}} {
		m, err := ParseManifest("m.yaml", []byte(head+"broker: {auth: "+tt.auth+"}\nchannels: {}\n"))
		if err != nil || m.Broker.Auth != tt.want {
			t.Errorf("auth %s: %+v %v", tt.auth, m, err)
		}
	}
	if m, err := ParseManifest("m.yaml", []byte(head+"broker:\n  servers: [nats://a:1, nats://b:2]\nchannels:\n")); err != nil || len(m.Broker.Servers) != 2 || m.Channels != nil {
		t.Fatalf("servers as a list: %+v %v", m, err)
	}
}

// TestParseManifestLimits: the limits block sets what it names and leaves the rest unset.
func TestParseManifestLimits(t *testing.T) {
	m, err := ParseManifest("cotal.yaml", []byte(head+"limits:\n  storage: 4GiB\n  memory: unlimited\n  subscriptions: 5000\n  payload: 512KiB\nchannels: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := trust.Limits{Storage: 4 << 30, Memory: trust.Unlimited, Subs: 5000, Payload: 512 << 10}
	if m.Limits != want {
		t.Fatalf("limits %+v, want %+v", m.Limits, want)
	}
	if m, err := ParseManifest("cotal.yaml", []byte(head+"channels: {}\n")); err != nil || m.Limits != (trust.Limits{}) {
		t.Fatalf("no limits block: %+v, %v", m.Limits, err)
	}
}

func TestParseManifestErrors(t *testing.T) {
	agents := "agents:\n  al: al.md\n  bo: bo.md\n" // lines 4 to 6
	tests := []struct {
		name string
		in   string
		want string // the whole message starts with this
	}{
		{"empty", "", "m.yaml:1: empty manifest"},
		{"comments only", "# nothing\n", "m.yaml:1: empty manifest"},
		{"not a map", "- a\n", "m.yaml:1: manifest: want a map of keys, not a list"},
		{"missing space", "apiVersion: cotal/v1\nkind: Mesh\nchannels: {}\n", "m.yaml:1: space is required"},
		{"missing channels", head, "m.yaml:1: channels is required"},
		{"missing apiVersion", "kind: Mesh\nspace: a\nchannels: {}\n", "m.yaml:1: apiVersion is required"},
		{"wrong apiVersion", "apiVersion: cotal/v2\nkind: Mesh\nspace: main\nchannels: {}\n", `m.yaml:1: apiVersion "cotal/v2": want cotal/v1`},
		{"wrong kind", "apiVersion: cotal/v1\nkind: Team\nspace: main\nchannels: {}\n", `m.yaml:2: kind "Team": want Mesh`},
		{"bad space", "apiVersion: cotal/v1\nkind: Mesh\nspace: my space\nchannels: {}\n", `m.yaml:3: space: invalid space name "my space"`},
		{"unknown top key", head + "channels: {}\nchanels: {}\n", `m.yaml:5: unknown key "chanels" at the top level (did you mean channels?)`},
		{"unknown top key far off", head + "channels: {}\nzzz: 1\n", `m.yaml:5: unknown key "zzz" at the top level (known keys: apiVersion, kind, space,`},
		{"duplicate top key", head + "channels: {}\nspace: other\n", `m.yaml:5: manifest: key "space" repeats the one on line 3`},
		{"unknown broker key", head + "broker:\n  servers: nats://a:1\n  creds: x\nchannels: {}\n", `m.yaml:6: unknown key "creds" in broker`},
		{"broker server credentials", head + "broker: {servers: \"nats://u:p@a:1\"}\nchannels: {}\n", `m.yaml:4: broker.servers: "nats://u:xxxxx@a:1" holds credentials`},
		{"broker server not nats", head + "broker: {servers: \"http://a:1\"}\nchannels: {}\n", `m.yaml:4: broker.servers: "http://a:1" is not a nats://host:port URL`},
		{"broker server without port", head + "broker:\n  servers: [nats://a]\nchannels: {}\n", `m.yaml:5: broker.servers: "nats://a" is not a nats://host:port URL`},
		{"broker host with port", head + "broker: {host: \"1.2.3.4:5\"}\nchannels: {}\n", `m.yaml:4: broker.host "1.2.3.4:5"`},
		{"broker auth", head + "broker: {auth: open}\nchannels: {}\n", `m.yaml:4: broker.auth "open": want static or user (or true, or false for an open mesh)`},
		{"broker auth list", head + "broker: {auth: [x]}\nchannels: {}\n", `m.yaml:4: broker.auth: want a string, not a list`},
		{"runtime list", head + "runtime: [pty]\nchannels: {}\n", `m.yaml:4: runtime: want a string, not a list`},
		{"limits unknown", head + "limits:\n  storage: 1GiB\n  disk: 2GiB\nchannels: {}\n", `m.yaml:6: unknown key "disk" in limits (known keys: storage, memory,`},
		{"limits size", head + "limits: {storage: lots}\nchannels: {}\n", `m.yaml:4: limits.storage: limit storage: size "lots": want a positive whole number`},
		{"limits zero", head + "limits:\n  connections: 0\nchannels: {}\n", `m.yaml:5: limits.connections: limit connections: "0": want a positive whole number, or unlimited`},
		{"limits list", head + "limits: {payload: [1]}\nchannels: {}\n", `m.yaml:4: limits.payload: want a string, not a list`},
		{"personaPermissions", head + "personaPermissions: maybe\nchannels: {}\n", `m.yaml:4: personaPermissions "maybe": want reject or include`},
		{"defaults unknown", head + "defaults:\n  replay: true\n  window: 1d\nchannels: {}\n", `m.yaml:6: unknown key "window" in defaults`},
		{"defaults replay", head + "defaults: {replay: yes}\nchannels: {}\n", `m.yaml:4: defaults.replay: want true or false, not "yes"`},
		{"defaults window", head + "defaults: {replayWindow: 1w}\nchannels: {}\n", `m.yaml:4: defaults.replayWindow "1w": want digits then s, m, h or d`},
		{"defaults window too long", head + "defaults: {replayWindow: 106752d}\nchannels: {}\n", `m.yaml:4: defaults.replayWindow "106752d": over the longest window, 106751d`},
		{"defaults window zero", head + "defaults: {replayWindow: 0s}\nchannels: {}\n", `m.yaml:4: defaults.replayWindow "0s": a window of 0 replays nothing`},
		{"defaults class", head + "defaults: {deliveryClass: fast}\nchannels: {}\n", `m.yaml:4: defaults.deliveryClass "fast": want live or durable`},
		{"agents a list", head + "agents: [a]\nchannels: {}\n", `m.yaml:4: agents: want a map of keys, not a list`},
		{"agent name", head + "agents:\n  bob-1: b.md\nchannels: {}\n", `m.yaml:5: agent "bob-1": use 1 to 64 letters, digits or _`},
		{"agent null", head + "agents:\n  bob:\nchannels: {}\n", `m.yaml:5: agents.bob: want a persona path (./agents/bob.md) or a map of settings`},
		{"agent unknown key", head + "agents:\n  bob:\n    persona: b.md\n    modle: x\nchannels: {}\n", `m.yaml:7: unknown key "modle" in agents.bob (did you mean model?)`},
		{"agent inline without model", head + "agents:\n  bob:\n    role: r\nchannels: {}\n", `m.yaml:5: agents.bob: an agent without a persona needs model or instructions`},
		{"agent role", head + "agents:\n  bob:\n    model: m\n    role: a b\nchannels: {}\n", `m.yaml:7: agents.bob.role "a b"`},
		{"agent cwd escapes", head + "agents:\n  bob:\n    model: m\n    cwd: ../x\nchannels: {}\n", `m.yaml:7: agents.bob.cwd "../x": want a folder inside`},
		{"agent cwd absolute", head + "agents:\n  bob:\n    model: m\n    cwd: /etc\nchannels: {}\n", `m.yaml:7: agents.bob.cwd "/etc"`},
		{"agent continuity", head + "agents:\n  bob:\n    model: m\n    continuity: always\nchannels: {}\n", `m.yaml:7: agents.bob.continuity "always": want none or exact`},
		{"agent admin", head + "agents:\n  bob:\n    model: m\n    capabilities:\n      - spawn\n      - admin\nchannels: {}\n", `m.yaml:9: agents.bob.capabilities: "admin" is never granted`},
		{"agent launchOptions list", head + "agents:\n  bob:\n    model: m\n    launchOptions: [a]\nchannels: {}\n", `m.yaml:7: agents.bob.launchOptions: want a map of options, not a list`},
		{"agent capabilities string", head + "agents:\n  bob:\n    model: m\n    capabilities: spawn\nchannels: {}\n", `m.yaml:7: agents.bob.capabilities: want a list such as [a, b], not "spawn"`},
		{"channels a list", head + "channels: [general]\n", `m.yaml:4: channels: want a map of keys, not a list`},
		{"wildcard channel", head + "channels:\n  team.>: {}\n", `m.yaml:5: channels: invalid channel "team.>": a manifest declares concrete channels`},
		{"bad channel", head + "channels:\n  team/x: {}\n", `m.yaml:5: channels: invalid channel "team/x": segment 1`},
		{"channel unknown key", head + agents + "channels:\n  general:\n    subscribers: [al]\n", `m.yaml:9: unknown key "subscribers" in channels.general (did you mean subscribe?)`},
		{"channel undeclared agent", head + agents + "channels:\n  general:\n    allowPublish:\n      - al\n      - carol\n", `m.yaml:11: channels.general.allowPublish: agent "carol" is not declared under agents`},
		{"channel undeclared, no agents", head + "channels:\n  general:\n    subscribe: [al]\n", `m.yaml:6: channels.general.subscribe: agent "al" is not declared under agents`},
		{"subscribe outside allowSubscribe", head + agents + "channels:\n  review:\n    allowSubscribe: [al]\n    subscribe:\n      - al\n      - bo\n",
			`m.yaml:12: channels.review.subscribe: "bo" is not in allowSubscribe [al]`},
		{"channel list of maps", head + agents + "channels:\n  general:\n    subscribe: [{al: 1}]\n", `m.yaml:9: channels.general.subscribe: entry 1: want a string, not a map`},
		{"channel replay", head + "channels:\n  general: {replay: 1}\n", `m.yaml:5: channels.general.replay: want true or false, not "1"`},
		{"channel a string", head + "channels:\n  general: yes\n", `m.yaml:5: channels.general: want a map of keys, not "yes"`},
		{"two documents", head + "channels: {}\n---\nkind: Mesh\n", "m.yaml:5: a second YAML document"},
		{"syntax", head + "channels:\n  general: {subscribe: [a}\n", "m.yaml:5: yaml:"},
		{"tab", head + "channels:\n\tgeneral: {}\n", "m.yaml:5: yaml: found character that cannot start any token"},
		{"too big", head + strings.Repeat("#", MaxManifestSize), "m.yaml:1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest("m.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("parsed %+v, want error %q", m, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Path != "m.yaml" || pe.Line < 1 {
				t.Fatalf("error %v (%T) is not a ParseError with path and line", err, err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error\n  %v\nwant prefix\n  %s", err, tt.want)
			}
		})
	}
}

func TestManifestPersonas(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("agents/planner.md", "---\nname: planner\nrole: planning\nsubscribe: [ops.alerts, general]\nallowSubscribe: [ops.>, general, random]\nallowPublish: [ops.alerts, general, review, 'te.*']\n---\nPlan.\n")
	write("agents/builder.md", "---\nname: builder\nrole: building\nsubscribe: [build.logs]\nallowSubscribe: ['>']\nallowPublish: [build.logs]\n---\nBuild.\n")
	manifest := write("cotal.yaml", head+`personaPermissions: include
agents:
  planner: ./agents/planner.md
  builder:
    persona: agents/builder.md
    role: implementer
    personaPermissions: reject
  lead:
    model: opus
channels:
  general:
    subscribe: [planner, builder, lead]
    allowPublish: [lead]
  review:
    allowSubscribe: [planner]
  ops.pager:
    subscribe: [lead]
`)
	m, err := LoadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	pers, err := m.LoadPersonas()
	if err != nil {
		t.Fatal(err)
	}
	if len(pers) != 2 || pers["planner"].Prompt != "Plan.\n" || pers["builder"].Name != "builder" || pers["lead"] != nil {
		t.Fatalf("personas %+v", pers)
	}
	got := m.AccessWith(pers)
	want := map[string]AgentAccess{
		// include: persona grants on channels the manifest does not declare are added;
		// general (declared, no post for planner) and review (declared) are not, and the
		// ops.> read grant is dropped because it overlaps the declared ops.pager, so the
		// ops.alerts join is granted by name.
		"planner": {Role: "planning", Subscribe: []string{"general", "ops.alerts"}, AllowSubscribe: []string{"general", "ops.alerts", "random", "review"},
			AllowPublish: []string{"ops.alerts", "te.*"}},
		// reject (the agent's own setting): the manifest alone; the manifest role wins.
		"builder": {Role: "implementer", Subscribe: []string{"general"}, AllowSubscribe: []string{"general"}},
		"lead":    {Subscribe: []string{"general", "ops.pager"}, AllowSubscribe: []string{"general", "ops.pager"}, AllowPublish: []string{"general"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("access\n got %+v\nwant %+v", got, want)
	}
	for name, acc := range got {
		for _, ch := range acc.Subscribe {
			if !protocol.ChannelCovered(acc.AllowSubscribe, ch) {
				t.Errorf("%s joins %s outside its read ACL %v", name, ch, acc.AllowSubscribe)
			}
		}
	}
	// Without personas, roles and grants come from the manifest only.
	if p := m.Access()["planner"]; p.Role != "" || len(p.AllowPublish) != 0 {
		t.Fatalf("manifest-only planner %+v", p)
	}

	// A bad persona file is refused at the agent's manifest line, with its own file:line.
	write("agents/builder.md", "---\nname: builder\nsubscribe: oops\n---\n")
	if _, err := m.LoadPersonas(); err == nil || !strings.HasPrefix(err.Error(), manifest+":7: agent \"builder\": persona: ") ||
		!strings.Contains(err.Error(), "builder.md:3: subscribe: want a list") {
		t.Fatalf("bad persona: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "agents", "builder.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LoadPersonas(); err == nil || !strings.HasPrefix(err.Error(), manifest+":7: agent \"builder\": persona: ") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing persona: %v", err)
	}
	if _, err := LoadManifest(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing manifest: %v", err)
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range []string{cliManifest, head + "channels: {}\n", head + "broker: {servers: nats://a:1, auth: false}\nchannels:\n  a: ~\n",
		head + "agents:\n  a: x.md\n  b: {model: m, launchOptions: {1: 2}}\nchannels:\n  c: {subscribe: [a], allowSubscribe: [a, b], allowPublish: [b]}\n",
		head + "defaults: {replay: true, replayWindow: 1d}\nchannels: &x {}\n", "", "- a", "a: *b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("f.yaml", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		declared := map[string]bool{}
		for _, a := range m.Agents {
			declared[a.Name] = true
		}
		for _, c := range m.Channels {
			for _, n := range append(append(append([]string(nil), c.Subscribe...), c.Readers()...), c.AllowPublish...) {
				if !declared[n] {
					t.Fatalf("channel %s names undeclared %q", c.Name, n)
				}
			}
		}
		for name, acc := range m.Access() {
			if !declared[name] {
				t.Fatalf("access for undeclared %q", name)
			}
			for _, ch := range acc.Subscribe {
				if !protocol.ChannelCovered(acc.AllowSubscribe, ch) {
					t.Fatalf("%s joins %s outside its read ACL %v", name, ch, acc.AllowSubscribe)
				}
			}
		}
	})
}

// An agent no channel names is DM-only, as the reference's provision.ts makes it
// (allowSubscribe ?? []): general is never implied, whether the manifest declares it or
// not and whether the included persona omits its read set or empties it; either way its
// lists are non-nil, so the mint keeps them.
func TestManifestAccessNoImplicitGeneral(t *testing.T) {
	nothing := AgentAccess{Subscribe: []string{}, AllowSubscribe: []string{}}
	for _, tc := range []struct {
		name, channels string
		persona        *Persona
		want           AgentAccess
	}{
		{"general undeclared", "  team:\n    subscribe: [a]\n", nil, nothing},
		{"general declared without it", "  general:\n    subscribe: [a]\n", nil, nothing},
		{"persona read set omitted", "  team:\n    subscribe: [a]\n", &Persona{Name: "b"}, nothing},
		{"persona reads nothing", "  team:\n    subscribe: [a]\n", &Persona{Name: "b", Subscribe: []string{}}, nothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest("cotal.yaml", []byte(head+"personaPermissions: include\nagents:\n  a: {model: opus}\n  b: {model: opus}\nchannels:\n"+tc.channels))
			if err != nil {
				t.Fatal(err)
			}
			got := m.AccessWith(map[string]*Persona{"b": tc.persona})["b"]
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("b: %#v, want %#v", got, tc.want)
			}
			if a := m.AccessWith(nil)["a"]; len(a.AllowSubscribe) != 1 {
				t.Fatalf("a, named by a channel, reads %v", a.AllowSubscribe)
			}
		})
	}
}
