package manager_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// The digests a reference caller pins for the manager's commands (MANAGER_CONTRACTS of
// implementations/manager/src/manager-service-contract.ts, revision 17), computed outside
// Go from the reference's schemas.
var refDigests = map[string][2]string{
	"status":  {"sha256:1db0472aaee8e6b9d8d3d430ee021a1b6efc559ab7c0b99186898c972c53dd2d", "sha256:f5bc9e7f12420653a6fbf6ce68bea1f65e6759e35263b3a85d814fcedef91115"},
	"ps":      {"sha256:1db0472aaee8e6b9d8d3d430ee021a1b6efc559ab7c0b99186898c972c53dd2d", "sha256:3b26875b7617c2902c05200f59e9076abd07a11a2e4f7305e1a7239b4321c948"},
	"spawn":   {"sha256:ad290a47d1632a31c436f63a2b33cd01083598c5c121eb5d14dadd2f2e9099fa", "sha256:d883a9f97f7c034772c7cbc28b22d63cf69870ba072d470c2f7b104f455e2e83"},
	"despawn": {"sha256:2fde1dce4a65d3dad7991113b4b98f51f10b94109898f049154759bc456567ef", "sha256:7ec7cf7c8d9011fc57022db68577851eb1fb57cdbef94766e4d6ca26bc70131e"},
	"input":   {"sha256:31b92d1926fc84652ca043f8b9a2c443ed272932e99935b64ab35e24d88c0052", "sha256:165c6b378b4731d23598bf42d390998da55afeac3690cfdad700820b0ad5b126"},
}

func TestEPContractDigestsAreTheReferences(t *testing.T) {
	for cmd, want := range refDigests {
		in, out, ok := mgrclient.EPContractDigests(cmd)
		if !ok || in != want[0] || out != want[1] {
			t.Errorf("%s: digests %s %s, want %s %s", cmd, in, out, want[0], want[1])
		}
	}
}

// epCaller is a foreign peer asking the manager on the reference's ep rails with raw
// nats.go: its own reply rail subscribed before it asks, requests built by hand.
type epCaller struct {
	t       *testing.T
	nc      *nats.Conn
	me      protocol.Principal
	uid     string
	replies chan *nats.Msg
}

func newEPCaller(t *testing.T, nc *nats.Conn, me protocol.Principal) *epCaller {
	t.Helper()
	c := &epCaller{t: t, nc: nc, me: me, uid: "opcaller00000000000000000000", replies: make(chan *nats.Msg, 16)}
	sub, err := nc.ChanSubscribe(mgrclient.EPReplyFilter(space, me, c.uid), c.replies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

func nonce(t *testing.T) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// request is a reference-shaped request body for command (targeted at target, if any).
func (c *epCaller) request(id, command string, args any, target map[string]any) map[string]any {
	d := refDigests[command]
	req := map[string]any{"v": 1, "id": id,
		"op":    map[string]any{"endpoint": "manager", "command": command, "inputDigest": d[0], "outputDigest": d[1]},
		"class": "ephemeral", "replyExpected": true, "deadlineMs": 20000,
		"from": map[string]any{"id": c.me.String(), "name": c.me.Actor}}
	if args != nil {
		req["args"] = args
	}
	if target != nil {
		req["target"] = target
	}
	return req
}

// send publishes body on the subject of command (mode and target tokens after it) and
// returns the reply's subject and envelope; publishing may fail (a broker refusal).
func (c *epCaller) send(command, mode string, tokens []string, body any) (string, mgrclient.EPReply, error) {
	c.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	subj := mgrclient.EPRequestSubject(space, mgrclient.EPRouteOne, "", command, mode, tokens, c.me, c.uid, nonce(c.t))
	if err := c.nc.Publish(subj, b); err != nil {
		return "", mgrclient.EPReply{}, err
	}
	if err := c.nc.Flush(); err != nil {
		return "", mgrclient.EPReply{}, err
	}
	select {
	case m := <-c.replies:
		var r mgrclient.EPReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			c.t.Fatalf("reply %s: %v", m.Data, err)
		}
		return m.Subject, r, nil
	case <-time.After(30 * time.Second):
		return "", mgrclient.EPReply{}, errors.New("no reply on the ep reply rail")
	}
}

// fakeHarness makes the manager find the claude harness as a script that runs this test
// binary as a seat (seatProgram mark PATH): the ep spawn names a harness, never a program.
func fakeHarness(t *testing.T, mark string) func(*manager.Manager) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nexec %q mark %q\n", exe, mark)), 0o700); err != nil {
		t.Fatal(err)
	}
	return func(m *manager.Manager) {
		m.LookPath = func(name string) (string, error) {
			if name == "claude" {
				return script, nil
			}
			return "", errors.New("not installed here")
		}
		m.Window = 2 * time.Second
	}
}

// spawnStop spawns worker w1 through the ep rails as c, checks it runs, and despawns it.
func spawnStop(t *testing.T, c *epCaller, mark string, seatPID func(string) int) {
	subj, r, err := c.send("spawn", "", nil, c.request("spawn-1", "spawn", map[string]any{"name": "w1", "agent": "claude"}, nil))
	if err != nil || !r.OK || r.ID != "spawn-1" {
		t.Fatalf("spawn: %+v (%s), %v", r, subj, err)
	}
	inst := manager.InstanceID("testhost")
	if !strings.HasPrefix(subj, "cotal."+space+".ep.reply.manager."+inst+".") || !strings.HasSuffix(subj, "."+c.me.Owner+"."+c.me.Actor+"."+c.uid+"."+strings.Split(subj, ".")[10]) {
		t.Fatalf("reply subject %s", subj)
	}
	var spawned mgrclient.EPSpawnResult
	if err := json.Unmarshal(r.Data, &spawned); err != nil || spawned.Name != "w1" || spawned.Owner != "local" || spawned.UID == "" ||
		spawned.GoalID != "spawn-1" || spawned.Executor.LifecycleUID != inst || spawned.Executor.Epoch == 0 {
		t.Fatalf("spawn answered %s (%v)", r.Data, err)
	}
	meshtest.Until(t, "the seat's program ran", 20*time.Second, func() bool { _, err := os.Stat(mark); return err == nil })

	_, r, err = c.send("ps", "", nil, c.request("ps-1", "ps", nil, nil))
	var rows []mgrclient.EPAgentRow
	if err != nil || !r.OK || json.Unmarshal(r.Data, &rows) != nil || len(rows) != 1 || rows[0].LifecycleUID != spawned.UID || rows[0].Status != string(protocol.SeatRunning) {
		t.Fatalf("ps: %+v %s, %v", r, r.Data, err)
	}
	pid := seatPID("w1")

	// A stale incarnation is refused, the current one stopped.
	target := map[string]any{"owner": "local", "actor": "w1", "lifecycleUid": "stale0000000000000000000000"}
	if _, r, err = c.send("despawn", "any", []string{"local"}, c.request("stop-0", "despawn", map[string]any{}, target)); err != nil || r.OK || r.Error.Code != mgrclient.EPExpired {
		t.Fatalf("despawn of a stale uid: %+v, %v", r, err)
	}
	target["lifecycleUid"] = spawned.UID
	_, r, err = c.send("despawn", "any", []string{"local"}, c.request("stop-1", "despawn", map[string]any{"graceful": true}, target))
	var stopped mgrclient.EPStopResult
	if err != nil || !r.OK || json.Unmarshal(r.Data, &stopped) != nil || !stopped.Stopped || stopped.Name != "w1" {
		t.Fatalf("despawn: %+v %s, %v", r, r.Data, err)
	}
	if pid > 0 {
		meshtest.Until(t, "the seat's process gone", 20*time.Second, func() bool { return !processAlive(pid) })
	}
	_, r, err = c.send("ps", "", nil, c.request("ps-2", "ps", nil, nil))
	if err != nil || !r.OK || json.Unmarshal(r.Data, &rows) != nil || len(rows) != 1 || rows[0].Status != string(protocol.SeatExited) {
		t.Fatalf("ps after despawn: %+v %s, %v", r, r.Data, err)
	}
}

// processAlive: pid names a running process (a zombie, already ended, does not count).
func processAlive(pid int) bool {
	_, err := workspace.ProcessRecord(pid)
	return err == nil
}

// TestEPSpawnAndDespawnByOperator: the operator's raw request in the reference's
// contract, on an open mesh, starts a Go-managed agent and stops it; a request from any
// other principal is refused with permission-denied and starts nothing.
func TestEPSpawnAndDespawnByOperator(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	r := newRig(t, fakeHarness(t, mark))
	nc := dial(t, r.url)

	mallory := newEPCaller(t, nc, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "mallory"})
	_, rep, err := mallory.send("spawn", "", nil, mallory.request("m-1", "spawn", map[string]any{"name": "w1", "agent": "claude"}, nil))
	if err != nil || rep.OK || rep.Error.Code != mgrclient.EPPermissionDenied {
		t.Fatalf("a non-operator's spawn: %+v, %v", rep, err)
	}
	if _, ok := r.ps("w1"); ok {
		t.Fatal("a non-operator's request spawned a seat")
	}

	op := newEPCaller(t, nc, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"})
	spawnStop(t, op, mark, func(name string) int { info, _ := r.ps(name); return info.PID })
	if info, _ := r.ps("w1"); info.Process != protocol.SeatExited {
		t.Fatalf("after despawn: %+v", info)
	}
}

// TestEPBoundary: faults of the envelope draw the reference's codes, and a cast is never
// answered.
func TestEPBoundary(t *testing.T) {
	r := newRig(t, nil)
	c := newEPCaller(t, dial(t, r.url), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"})
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		code string
	}{
		{"version", func(m map[string]any) { m["v"] = 2 }, mgrclient.EPUnsupportedVersion},
		{"digest", func(m map[string]any) {
			m["op"].(map[string]any)["inputDigest"] = "sha256:" + strings.Repeat("0", 64)
		}, mgrclient.EPContractMismatch},
		{"no digest", func(m map[string]any) { delete(m["op"].(map[string]any), "outputDigest") }, mgrclient.EPContractMismatch},
		{"op", func(m map[string]any) { m["op"].(map[string]any)["command"] = "ps" }, mgrclient.EPOpMismatch},
		{"journal call", func(m map[string]any) { m["class"] = "journal" }, mgrclient.EPBadRequest},
		{"sender", func(m map[string]any) { m["from"] = map[string]any{"id": "local.someone", "name": "x"} }, mgrclient.EPSenderMismatch},
		{"args on void", func(m map[string]any) { m["args"] = map[string]any{"x": 1} }, mgrclient.EPBadRequest},
		{"target on untargeted", func(m map[string]any) {
			m["target"] = map[string]any{"owner": "local", "actor": "w", "lifecycleUid": "abcdefghijklmnopqrstuvwxyz"}
		}, mgrclient.EPTargetMismatch},
	} {
		req := c.request("b-1", "status", nil, nil)
		tc.edit(req)
		_, rep, err := c.send("status", "", nil, req)
		if err != nil || rep.OK || rep.Error == nil || rep.Error.Code != tc.code {
			t.Errorf("%s: %+v, %v; want %s", tc.name, rep, err, tc.code)
		}
	}
	_, rep, err := c.send("status", "", nil, c.request("s-1", "status", nil, nil))
	var st mgrclient.EPStatus
	if err != nil || !rep.OK || json.Unmarshal(rep.Data, &st) != nil || st.InstanceID != manager.InstanceID("testhost") || st.Runtime != "pty" {
		t.Fatalf("status: %+v %s, %v", rep, rep.Data, err)
	}
	// A cast (even a refused one) is not answered: the next call's answer is the next reply.
	cast := c.request("c-1", "status", nil, nil)
	cast["v"], cast["replyExpected"] = 2, false
	b, _ := json.Marshal(cast)
	if err := c.nc.Publish(mgrclient.EPRequestSubject(space, mgrclient.EPRouteOne, "", "status", "", nil, c.me, c.uid, nonce(t)), b); err != nil {
		t.Fatal(err)
	}
	if _, rep, err = c.send("status", "", nil, c.request("s-2", "status", nil, nil)); err != nil || rep.ID != "s-2" {
		t.Fatalf("after a cast: %+v, %v", rep, err)
	}
}

// TestEPAuthority: on a mesh that checks credentials, the operator's credential (the
// project's own identity) starts and stops an agent through the ep rails; an admin's and
// an agent's credential cannot even publish the request, and nothing is spawned.
func TestEPAuthority(t *testing.T) {
	mesh := meshtest.Start(t, space)
	js := mesh.Provision(space, provision.Options{DefaultDeliveryClass: "live"})
	mint := func(spec trust.UserSpec) []byte {
		t.Helper()
		if spec.LifecycleUID != "" {
			if _, err := provision.Agent(t.Context(), js, space, spec.Principal, spec.LifecycleUID, spec.Role); err != nil {
				t.Fatal(err)
			}
		}
		return mesh.Mint(space, spec)
	}
	mark := filepath.Join(t.TempDir(), "ran")
	// provision.Space makes the records bucket, as the reference's space setup does; a
	// space made without it (an older cotal) gets one here.
	if _, err := js.KeyValue(t.Context(), provision.BucketRecords(space)); errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: provision.BucketRecords(space), History: 1, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
	}
	opP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"}
	mgrCreds, err := trust.ReadCreds(mint(trust.UserSpec{Name: "manager", Profile: trust.ProfileManager,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}, LifecycleUID: "manager0000000000000000000000"}))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, mesh.URL, client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint, LifecycleUID: mgrCreds.LifecycleUID},
				nats.UserJWTAndSeed(mgrCreds.JWT, mgrCreds.Seed), nats.CustomInboxPrefix(mgrCreds.InboxPrefix))
		},
		Project: project(t), Space: space, Servers: mesh.URL, Exe: exe, Host: "testhost", Auth: true,
		Operator: opP,
		Mint:     func(_ context.Context, spec trust.UserSpec) ([]byte, error) { return mint(spec), nil },
		Environ:  func() []string { return append(os.Environ(), seatEnv+"=1") },
		Logger:   brokertest.Logger(t),
	}
	fakeHarness(t, mark)(m)
	r := &rig{t: t, m: m, done: make(chan error, 1)}
	r.start()

	refused := func(name string, spec trust.UserSpec) {
		t.Helper()
		errs := make(chan error, 4)
		nc := mesh.Connect(mint(spec), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		c := &epCaller{t: t, nc: nc, me: spec.Principal, uid: "nouid000000000000000000000000"}
		if spec.LifecycleUID != "" {
			c.uid = spec.LifecycleUID
		}
		b, _ := json.Marshal(c.request("x-1", "spawn", map[string]any{"name": "w1", "agent": "claude"}, nil))
		subj := mgrclient.EPRequestSubject(space, mgrclient.EPRouteOne, "", "spawn", "", nil, c.me, c.uid, nonce(t))
		if err := nc.Publish(subj, b); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case e := <-errs:
			if !strings.Contains(strings.ToLower(e.Error()), "permissions violation for publish") {
				t.Fatalf("%s: %v", name, e)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the broker did not refuse the publish of %s", name, subj)
		}
	}
	refused("admin", trust.UserSpec{Name: "dash", Profile: trust.ProfileAdmin, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "dash"}})
	refused("agent", trust.UserSpec{Name: "worker", Profile: trust.ProfileAgent, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "worker"},
		LifecycleUID: "worker00000000000000000000000", Capabilities: []string{trust.CapabilitySpawn}})
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused request ran a seat")
	}

	op := newEPCaller(t, mesh.Connect(mint(meshtest.ProvisionerSpec("op"))), opP)
	spawnStop(t, op, mark, func(string) int { return 0 })

	// With its own credential the manager published its contract and its service record:
	// the operator resolves it as a reference caller does.
	digest := describeManager(t, op)
	if doc := closureRoot(t, op.nc, digest); doc["urn"] != "ai.cotal.manager" {
		t.Fatalf("cluster document %v", doc)
	}
	kv, err := js.KeyValue(t.Context(), provision.BucketRecords(space))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(t.Context(), manager.ServiceRecordKey(manager.InstanceID("testhost"))+".spec"); err != nil || !strings.Contains(string(e.Value()), digest) {
		t.Fatalf("service record: %v", err)
	}
}

// TestEPCaller: Go's own ep caller (mgrclient.EPCaller) drives the manager in the
// reference's contract, and tells a space with no manager on the rails.
func TestEPCaller(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	r := newRig(t, fakeHarness(t, mark))
	nc := dial(t, r.url)
	c := &mgrclient.EPCaller{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, UID: "opcaller00000000000000000000"}
	var spawned mgrclient.EPSpawnResult
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "spawn", Args: map[string]any{"name": "w2", "agent": "claude"}}, &spawned); err != nil || spawned.Name != "w2" {
		t.Fatalf("spawn: %+v, %v", spawned, err)
	}
	var st mgrclient.EPStatus
	subj, err := c.Call(t.Context(), mgrclient.EPCall{Route: mgrclient.EPRouteInst, Instance: manager.InstanceID("testhost"), Command: "status"}, &st)
	if err != nil || st.AgentCount != 1 || !strings.Contains(subj, ".ep.reply.manager."+manager.InstanceID("testhost")+".") {
		t.Fatalf("status: %+v on %s, %v", st, subj, err)
	}
	var stopped mgrclient.EPStopResult
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "despawn", Mode: "owner",
		Target: &mgrclient.EPTarget{Owner: "local", Actor: "w2", LifecycleUID: spawned.UID}}, &stopped); err != nil || !stopped.Stopped {
		t.Fatalf("despawn: %+v, %v", stopped, err)
	}
	var me *mgrclient.Error
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "attach", Mode: "owner",
		Target: &mgrclient.EPTarget{Owner: "local", Actor: "w2", LifecycleUID: spawned.UID}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPUnimplemented {
		t.Fatalf("attach: %v", err)
	}
	var cwd map[string]string
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "resolve-cwd", Args: map[string]any{"cwd": r.proj.Root}}, &cwd); err != nil || cwd["host"] != "testhost" || cwd["cwd"] == "" {
		t.Fatalf("resolve-cwd: %v, %v", cwd, err)
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "resolve-cwd", Args: map[string]any{"cwd": "relative/dir"}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPBadRequest {
		t.Fatalf("resolve-cwd of a relative path: %v", err)
	}
	var list struct {
		Personas []mgrclient.EPPersonaRow `json:"personas"`
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "list-personas"}, &list); err != nil || len(list.Personas) != 1 || list.Personas[0].Name != "default" {
		t.Fatalf("list-personas: %+v, %v", list, err)
	}
	var shown mgrclient.EPPersonaRow
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "show-persona", Args: map[string]any{"name": "default"}}, &shown); err != nil || shown.Persona != "You help." {
		t.Fatalf("show-persona: %+v, %v", shown, err)
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "show-persona", Args: map[string]any{"name": "../etc"}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPBadRequest {
		t.Fatalf("show-persona of a path: %v", err)
	}
	other := &mgrclient.EPCaller{NC: nc, Space: "elsewhere", Caller: c.Caller, UID: c.UID}
	if _, err := other.Call(t.Context(), mgrclient.EPCall{Command: "ps"}, nil); !errors.Is(err, mgrclient.ErrNoManager) {
		t.Fatalf("ps of a space with no manager: %v", err)
	}
}
