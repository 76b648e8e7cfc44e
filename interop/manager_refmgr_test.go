package interop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
)

// The digests a reference caller pins (MANAGER_CONTRACTS of
// implementations/manager/src/manager-service-contract.ts, cluster ai.cotal.manager
// revision 17), computed outside Go from the reference's schemas: what a reference manager
// holds every request to.
var refPins = map[string][2]string{
	"status":  {"sha256:1db0472aaee8e6b9d8d3d430ee021a1b6efc559ab7c0b99186898c972c53dd2d", "sha256:f5bc9e7f12420653a6fbf6ce68bea1f65e6759e35263b3a85d814fcedef91115"},
	"ps":      {"sha256:1db0472aaee8e6b9d8d3d430ee021a1b6efc559ab7c0b99186898c972c53dd2d", "sha256:3b26875b7617c2902c05200f59e9076abd07a11a2e4f7305e1a7239b4321c948"},
	"spawn":   {"sha256:ad290a47d1632a31c436f63a2b33cd01083598c5c121eb5d14dadd2f2e9099fa", "sha256:d883a9f97f7c034772c7cbc28b22d63cf69870ba072d470c2f7b104f455e2e83"},
	"despawn": {"sha256:2fde1dce4a65d3dad7991113b4b98f51f10b94109898f049154759bc456567ef", "sha256:7ec7cf7c8d9011fc57022db68577851eb1fb57cdbef94766e4d6ca26bc70131e"},
	"input":   {"sha256:31b92d1926fc84652ca043f8b9a2c443ed272932e99935b64ab35e24d88c0052", "sha256:165c6b378b4731d23598bf42d390998da55afeac3690cfdad700820b0ad5b126"},
}

const refInstance = "dqjkfn5tldej7cowacnqkcfvje"

// refManager is a reference manager as a foreign peer, raw nats.go only: it serves the
// class rail (queue group manager) and its instance rail, holds each request to the
// reference's envelope and pinned digests, answers on the reply subject derived from the
// request subject (deriveReplySubject) with the fixtures' replies, and remembers what it
// was asked.
type refManager struct {
	t  *testing.T
	nc *nats.Conn

	mu      sync.Mutex
	running bool
	asked   []refAsk
}

type refAsk struct {
	subject string
	body    []byte
}

func startRefManager(t *testing.T, url string) *refManager {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	m := &refManager{t: t, nc: nc}
	if _, err := nc.QueueSubscribe("cotal.main.ep.one.manager.>", "manager", m.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("cotal.main.ep.inst.manager."+refInstance+".>", m.handle); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *refManager) last(command string) refAsk {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.asked) - 1; i >= 0; i-- {
		if s := m.asked[i].subject; strings.Contains(s, ".manager."+command+".") || strings.Contains(s, ".manager."+refInstance+"."+command+".") {
			return m.asked[i]
		}
	}
	m.t.Fatalf("the reference manager was never asked %s", command)
	return refAsk{}
}

// reply is a fixture reply with the request's id.
func reply(t *testing.T, fixture, id string) []byte {
	var r map[string]any
	if err := json.Unmarshal(mgrFixture(t, fixture), &r); err != nil {
		t.Fatal(err)
	}
	r["id"] = id
	b, _ := json.Marshal(r)
	return b
}

func (m *refManager) handle(msg *nats.Msg) {
	t := strings.Split(strings.TrimPrefix(msg.Subject, "cotal.main.ep."), ".")
	route, t := t[0], t[2:]
	if route == "inst" {
		t = t[1:]
	}
	command := t[0]
	n := len(t)
	if n < 5 {
		m.t.Errorf("request subject %s is short", msg.Subject)
		return
	}
	owner, actor, uid, nonce := t[n-4], t[n-3], t[n-2], t[n-1]
	replyTo := strings.Join([]string{"cotal.main.ep.reply.manager", refInstance, "7", owner, actor, uid, nonce}, ".")
	m.mu.Lock()
	m.asked = append(m.asked, refAsk{subject: msg.Subject, body: msg.Data})
	m.mu.Unlock()

	var req struct {
		V  int    `json:"v"`
		ID string `json:"id"`
		Op struct {
			Endpoint, Command, InputDigest, OutputDigest string
		} `json:"op"`
		Class         string          `json:"class"`
		ReplyExpected bool            `json:"replyExpected"`
		DeadlineMs    int64           `json:"deadlineMs"`
		Args          json.RawMessage `json:"args"`
		Target        *struct {
			Owner, Actor, LifecycleUID string
		} `json:"target"`
		From struct{ ID, Name string } `json:"from"`
	}
	fail := func(code, why string) {
		b, _ := json.Marshal(map[string]any{"v": 1, "id": req.ID, "ok": false, "error": map[string]any{"code": code, "message": why, "outcome": "not-executed"}})
		_ = m.nc.Publish(replyTo, b)
	}
	if err := json.Unmarshal(msg.Data, &req); err != nil || req.V != 1 {
		fail("bad-request", "not a v1 request")
		return
	}
	pin := refPins[command]
	switch {
	case req.Op.Endpoint != "manager" || req.Op.Command != command:
		fail("op-mismatch", "op does not agree with the subject")
		return
	case req.Op.InputDigest != pin[0] || req.Op.OutputDigest != pin[1]:
		fail("contract-mismatch", "the pinned digests are not this manager's")
		return
	case req.Class != "ephemeral" || !req.ReplyExpected || req.DeadlineMs <= 0:
		fail("bad-request", "a call is ephemeral, expects a reply and has a deadline")
		return
	case req.From.ID != owner+"."+actor:
		fail("sender-mismatch", "from.id is not the subject's sender")
		return
	}
	var out []byte
	switch command {
	case "status":
		b, _ := json.Marshal(map[string]any{"v": 1, "id": req.ID, "ok": true, "data": map[string]any{"instanceId": refInstance, "runtime": "pty",
			"custody": "legacy", "agentCount": 0, "uptimeMs": 1, "connectors": []any{}, "classSpawn": true,
			"staticReconciliation": map[string]any{"state": "idle", "failures": []any{}}}})
		out = b
	case "ps":
		m.mu.Lock()
		running := m.running
		m.mu.Unlock()
		if running {
			out = reply(m.t, "ps.reply.json", req.ID)
		} else {
			out = []byte(`{"v":1,"id":"` + req.ID + `","ok":true,"data":[]}`)
		}
	case "spawn":
		var a struct{ Name string }
		_ = json.Unmarshal(req.Args, &a)
		if a.Name != "w1" {
			out = reply(m.t, "denied.reply.json", req.ID)
			break
		}
		m.mu.Lock()
		m.running = true
		m.mu.Unlock()
		out = reply(m.t, "spawn.reply.json", req.ID)
	case "despawn":
		m.mu.Lock()
		ok := m.running && req.Target != nil && req.Target.Actor == "w1" && req.Target.LifecycleUID == "a1b2c3d4e5f6g7h8i9j0k1l2m3"
		m.running = false
		m.mu.Unlock()
		if !ok {
			fail("not-found", "no such agent")
			return
		}
		out = reply(m.t, "despawn.reply.json", req.ID)
	case "input":
		var a struct {
			Text  string
			Enter bool
		}
		_ = json.Unmarshal(req.Args, &a)
		n := len(a.Text)
		if a.Enter {
			n++
		}
		b, _ := json.Marshal(map[string]any{"v": 1, "id": req.ID, "ok": true, "data": map[string]any{"name": "w1", "bytes": n}})
		out = b
	default:
		fail("unimplemented", "not in this test")
		return
	}
	_ = m.nc.Publish(replyTo, out)
}

// asked is the canonical form of a request body with its id set to id (Go draws fresh
// ids; the fixture's is fixed).
func askedAs(t *testing.T, body []byte, id string) string {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	v["id"] = id
	b, _ := json.Marshal(v)
	return canonical(t, b)
}

// TestGoCLIDrivesAReferenceManager: with no Go manager on the space, Go's manager client
// (behind cotal ps, spawn, stop and input) finds the reference's manager on the endpoint
// rails and drives it in the reference's contract: its requests are the fixtures' bytes,
// its answers are read into Go's seat rows, its refusals are Go's errors.
func TestGoCLIDrivesAReferenceManager(t *testing.T) {
	url := brokertest.Start(t).ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	root := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	c := &mgrclient.Client{NC: nc, Space: "main", Caller: root, Operator: true}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, nil); !errors.Is(err, mgrclient.ErrNoManager) {
		t.Fatalf("no manager of either kind: %v", err)
	}
	m := startRefManager(t, url)

	var ps protocol.PsResult
	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil || len(ps.Seats) != 0 {
		t.Fatalf("ps of an empty reference manager: %+v, %v", ps, err)
	}

	var spawned protocol.SpawnResult
	if err := c.Call(ctx, protocol.MgrSpawn, protocol.SpawnArgs{Name: "w1", Agent: "claude", Prompt: "review the diff"}, &spawned); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if spawned.Name != "w1" || spawned.UID != "a1b2c3d4e5f6g7h8i9j0k1l2m3" || spawned.WindowMs != 30000 {
		t.Fatalf("spawn answer read as %+v", spawned)
	}
	ask := m.last("spawn")
	if !strings.HasPrefix(ask.subject, "cotal.main.ep.one.manager.spawn.local.root.") || len(strings.Split(ask.subject, ".")) != 10 {
		t.Errorf("spawn asked on %s", ask.subject)
	}
	if got, want := askedAs(t, ask.body, "req-1"), canonical(t, mgrFixture(t, "spawn.request.json")); got != want {
		t.Errorf("spawn request\n got %s\nwant %s", got, want)
	}

	ps = protocol.PsResult{}
	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil || len(ps.Seats) != 1 {
		t.Fatalf("ps: %+v, %v", ps, err)
	}
	s := ps.Seats[0]
	if s.Name != "w1" || s.Process != protocol.SeatRunning || s.Mesh != "idle" || s.UID != "a1b2c3d4e5f6g7h8i9j0k1l2m3" ||
		s.PID != 4243 || s.Agent != "claude" || s.Model != "sonnet" || s.Host != "testhost" || s.Instance != refInstance ||
		s.Spawner != "local.root" || time.Since(time.UnixMilli(s.Started)) < 60*time.Second {
		t.Errorf("the reference's row read as %+v", s)
	}
	ps = protocol.PsResult{}
	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{Name: "w1", Wait: true}, &ps); err != nil || len(ps.Seats) != 1 || ps.Seats[0].Outcome != protocol.SettleSucceeded {
		t.Fatalf("settle wait: %+v, %v", ps, err)
	}

	var typed map[string]int
	if err := c.Call(ctx, protocol.MgrInput, protocol.InputArgs{Name: "w1", Data: []byte("hi\r")}, &typed); err != nil || typed["bytes"] != 3 {
		t.Fatalf("input: %v, %v", typed, err)
	}
	if got := askedAs(t, m.last("input").body, "x"); !strings.Contains(got, `"args":{"enter":true,"text":"hi"}`) {
		t.Errorf("input request %s", got)
	}

	var stopped protocol.SeatInfo
	if err := c.Call(ctx, protocol.MgrStop, protocol.NameArgs{Name: "w1"}, &stopped); err != nil || stopped.Name != "w1" || stopped.Process != protocol.SeatExited {
		t.Fatalf("stop: %+v, %v", stopped, err)
	}
	ask = m.last("despawn")
	if !strings.HasPrefix(ask.subject, "cotal.main.ep.inst.manager."+refInstance+".despawn.any.local.local.root.") {
		t.Errorf("despawn asked on %s", ask.subject)
	}
	if got, want := askedAs(t, ask.body, "req-2"), canonical(t, mgrFixture(t, "despawn.request.json")); got != want {
		t.Errorf("despawn request\n got %s\nwant %s", got, want)
	}

	var me *mgrclient.Error
	if err := c.Call(ctx, protocol.MgrStop, protocol.NameArgs{Name: "w1"}, nil); !errors.As(err, &me) || me.Code != protocol.MgrCodeNotFound {
		t.Fatalf("stop of an agent the reference manager no longer runs: %v", err)
	}
	if err := c.Call(ctx, protocol.MgrSpawn, protocol.SpawnArgs{Name: "mallory"}, nil); !errors.As(err, &me) || me.Code != protocol.MgrCodeDenied ||
		!strings.Contains(me.Message, "may not ask the manager to spawn") {
		t.Fatalf("a refusal of the reference manager: %v", err)
	}
	if err := c.Call(ctx, protocol.MgrSpawn, protocol.SpawnArgs{Persona: "reviewer", Name: "w9"}, nil); !errors.As(err, &me) || me.Code != protocol.MgrCodeBad ||
		!strings.Contains(me.Message, "spawns the agent file of the name") {
		t.Fatalf("a persona the reference contract cannot carry: %v", err)
	}
	if err := c.Call(ctx, protocol.MgrAttach, protocol.AttachArgs{Name: "w1", Session: "s"}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPUnimplemented {
		t.Fatalf("attach: %v", err)
	}

	// An agent's client asks Go's agent rail only: it has no grant on the ep rails.
	m.mu.Lock()
	before := len(m.asked)
	m.mu.Unlock()
	agent := &mgrclient.Client{NC: nc, Space: "main", Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "worker"}}
	if err := agent.Call(ctx, protocol.MgrSpawn, protocol.SpawnArgs{Name: "w1"}, nil); !errors.Is(err, mgrclient.ErrNoManager) {
		t.Fatalf("an agent's spawn: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.asked) != before {
		t.Fatalf("an agent's client asked the reference manager: %s", m.asked[len(m.asked)-1].subject)
	}
}
