package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// refSpace is testdata/provision/reference-space.json: what the reference provisions.
type refSpace struct {
	Streams []struct {
		Source string          `json:"source"`
		Op     string          `json:"op"`
		Config json.RawMessage `json:"config"`
		Update map[string]any  `json:"update"`
	} `json:"streams"`
	Consumers []struct {
		Source string          `json:"source"`
		Stream string          `json:"stream"`
		Config json.RawMessage `json:"config"`
	} `json:"consumers"`
}

// loadRef reads the reference's provisioning shapes with the member's uid in place.
func loadRef(t *testing.T, uid string) refSpace {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "provision", "reference-space.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r refSpace
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), "abcdefghijklmnopqrstuvwxyz", uid)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// apiError is a JetStream API error reply.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// jsAPI sends one raw JetStream API request and decodes the reply into a map.
func jsAPI(nc *nats.Conn, subject string, body any) (map[string]any, *apiError, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, nil, err
		}
	}
	msg, err := nc.Request(subject, data, 5*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", subject, err)
	}
	var reply map[string]any
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", subject, err)
	}
	if e, ok := reply["error"]; ok {
		b, _ := json.Marshal(e)
		var ae apiError
		_ = json.Unmarshal(b, &ae)
		return reply, &ae, nil
	}
	return reply, nil, nil
}

// applyReference provisions the space the way the reference's cotal up and daemons do,
// over a raw connection: stream adds (refused on another config), KV creates (info first),
// the authority stores' create-or-verify, and consumer adds (refused on another config).
func applyReference(nc *nats.Conn, ref refSpace) error {
	for _, s := range ref.Streams {
		var cfg map[string]any
		if err := json.Unmarshal(s.Config, &cfg); err != nil {
			return err
		}
		name := cfg["name"].(string)
		switch s.Op {
		case "add":
			if _, ae, err := jsAPI(nc, "$JS.API.STREAM.CREATE."+name, cfg); err != nil || ae != nil {
				return fmt.Errorf("streams.add %s (%s): %v %+v", name, s.Source, err, ae)
			}
		case "kvm.create":
			_, ae, err := jsAPI(nc, "$JS.API.STREAM.INFO."+name, nil)
			if err != nil {
				return err
			}
			if ae != nil && ae.ErrCode == 10059 { // stream not found
				if _, ae, err := jsAPI(nc, "$JS.API.STREAM.CREATE."+name, cfg); err != nil || ae != nil {
					return fmt.Errorf("kvm.create %s (%s): %v %+v", name, s.Source, err, ae)
				}
				if s.Update != nil {
					info, _, err := jsAPI(nc, "$JS.API.STREAM.INFO."+name, nil)
					if err != nil {
						return err
					}
					up := info["config"].(map[string]any)
					for k, v := range s.Update {
						up[k] = v
					}
					if _, ae, err := jsAPI(nc, "$JS.API.STREAM.UPDATE."+name, up); err != nil || ae != nil {
						return fmt.Errorf("update %s: %v %+v", name, err, ae)
					}
				}
			}
		}
	}
	// ensureAuthorityStores verifies the auth store whoever made it.
	info, ae, err := jsAPI(nc, "$JS.API.STREAM.INFO.KV_cotal_auth_"+space, nil)
	if err != nil || ae != nil {
		return fmt.Errorf("auth store: %v %+v", err, ae)
	}
	c := info["config"].(map[string]any)
	if c["allow_direct"] != false || c["allow_msg_ttl"] != true || c["storage"] != "file" ||
		!reflect.DeepEqual(c["subjects"], []any{"$KV.cotal_auth_" + space + ".>"}) {
		return fmt.Errorf("the auth store has a drifted shape (allow_direct=%v, allow_msg_ttl=%v)", c["allow_direct"], c["allow_msg_ttl"])
	}
	for _, cs := range ref.Consumers {
		var cfg map[string]any
		if err := json.Unmarshal(cs.Config, &cfg); err != nil {
			return err
		}
		subject := fmt.Sprintf("$JS.API.CONSUMER.CREATE.%s.%s.%s", cs.Stream, cfg["durable_name"], cfg["filter_subject"])
		body := map[string]any{"stream_name": cs.Stream, "config": cfg, "action": "create"}
		if _, ae, err := jsAPI(nc, subject, body); err != nil || ae != nil {
			return fmt.Errorf("consumers.add %s on %s (%s): %v %+v", cfg["durable_name"], cs.Stream, cs.Source, err, ae)
		}
	}
	return nil
}

// snapshot reads the config of every stream and consumer of ref.
func snapshot(t *testing.T, nc *nats.Conn, ref refSpace) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	read := func(key, subject string) {
		info, ae, err := jsAPI(nc, subject, nil)
		if err != nil || ae != nil {
			t.Fatalf("%s: %v %+v", subject, err, ae)
		}
		out[key] = info["config"].(map[string]any)
	}
	for _, s := range ref.Streams {
		var cfg struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(s.Config, &cfg)
		read(cfg.Name, "$JS.API.STREAM.INFO."+cfg.Name)
	}
	for _, c := range ref.Consumers {
		var cfg struct {
			Durable string `json:"durable_name"`
		}
		_ = json.Unmarshal(c.Config, &cfg)
		read(c.Stream+"/"+cfg.Durable, "$JS.API.CONSUMER.INFO."+c.Stream+"."+cfg.Durable)
	}
	return out
}

// runLane runs the Go delivery daemon with its default ack wait until the test ends.
func runLane(t *testing.T, m *meshtest.Mesh) {
	t.Helper()
	deliverytest.Serve(t, deliverytest.Lane(t, m, space))
}

// member mints an agent credential for actor with uid reading and posting general, with its
// DM durable as cotal up makes it (an existing one is kept).
func member(t *testing.T, m *meshtest.Mesh, js jetstream.JetStream, actor, uid string) []byte {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	if _, err := provision.Agent(t.Context(), js, space, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	return m.Mint(space, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}})
}

// connect joins the space as a Go endpoint with creds.
func connect(t *testing.T, m *meshtest.Mesh, creds []byte) *client.Endpoint {
	t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: space, Name: c.Principal.Actor, LifecycleUID: c.LifecycleUID,
		Heartbeat: time.Hour, Logger: brokertest.Logger(t)}, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ep
}

// storedFor counts the hand-off copies DLV holds for local.<actor> with uid.
func storedFor(t *testing.T, js jetstream.JetStream, actor, uid string) uint64 {
	t.Helper()
	subj := protocol.DLVSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}, uid)
	s, err := js.Stream(t.Context(), protocol.StreamDLV(space))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// offlineDelivery has bob join general and leave, alice post text, and bob come back
// and read it from his hand-off durable, once.
func offlineDelivery(t *testing.T, m *meshtest.Mesh, js jetstream.JetStream, bobUID, text string, stored uint64) {
	t.Helper()
	bobCreds := member(t, m, js, "bob", bobUID)
	bob := connect(t, m, bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := connect(t, m, member(t, m, js, "alice", protocol.NewLifecycleUID()))
	if _, err := alice.Post(t.Context(), "general", client.Text(text)); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the copy stored", deadline, func() bool { return storedFor(t, js, "bob", bobUID) == stored })
	bob = connect(t, m, bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case in := <-bob.Messages():
			if err := in.Ack(); err != nil {
				t.Fatal(err)
			}
			if in.Message.Text() == text {
				if !in.Durable {
					t.Fatalf("%q arrived live, want from the hand-off durable", text)
				}
				return
			}
		case <-time.After(deadline):
			t.Fatalf("bob did not get %q", text)
		}
	}
}

// TestReferenceProvisionedSpace: on a space the reference provisioned (every stream,
// bucket and consumer as its source makes them), provision.Space and the Go daemon start,
// change no config but the one made different on purpose (presence refuses rollup), and
// a durable-channel post reaches an offline member through the reference's hand-off durable.
func TestReferenceProvisionedSpace(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provisioner(space)
	nc := js.Conn()
	uid := protocol.NewLifecycleUID()
	ref := loadRef(t, uid)
	if err := applyReference(nc, ref); err != nil {
		t.Fatalf("the reference's provisioning on an empty space: %v", err)
	}
	acl, err := js.KeyValue(t.Context(), protocol.BucketACL(space)) // acls.ts commitAcl at mint
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acl.Create(t.Context(), "local.bob."+uid, []byte(`{"allowSubscribe":["general"],"issuedAllowSubscribe":["general"],"revision":1,"updatedAt":1700000000000}`)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, nc, ref)

	rep, err := provision.Space(t.Context(), js, space, provision.Options{})
	if err != nil {
		t.Fatalf("provision.Space on the reference's space: %v", err)
	}
	if !slices.Equal(rep.Updated, []string{protocol.BucketPresence(space)}) || len(rep.Notes) != 0 {
		t.Errorf("report %+v, want only the presence bucket updated (rollup off) and no notes", rep)
	}
	// Go's mint of a member of the role finds the reference's dm_, dlv_ and svc_ as they are;
	// it adds only the two public-bucket watchers, which this image of the space lacks.
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	if rep, err := provision.Agent(t.Context(), js, space, bob, uid, "reviewer"); err != nil ||
		len(rep.Existing) != 3 || len(rep.Updated) != 0 || !slices.Equal(rep.Created, []string{
		protocol.ConsumerKVWatch(protocol.KVWatchPresence, bob, uid), protocol.ConsumerKVWatch(protocol.KVWatchChannels, bob, uid)}) {
		t.Errorf("provision.Agent on the reference's durables: %+v %v, want all three existing and the two watchers created", rep, err)
	}
	runLane(t, m)
	offlineDelivery(t, m, js, uid, "to the reference's space", 1)

	after := snapshot(t, nc, ref)
	presence := "KV_" + protocol.BucketPresence(space)
	if after[presence]["allow_rollup_hdrs"] != false {
		t.Errorf("presence still allows rollup")
	}
	after[presence]["allow_rollup_hdrs"] = before[presence]["allow_rollup_hdrs"]
	for name, b := range before {
		if !reflect.DeepEqual(b, after[name]) {
			t.Errorf("%s changed:\n before %v\n after  %v", name, b, after[name])
		}
	}
	// The reference's own provisioning still succeeds on it afterwards.
	if err := applyReference(nc, ref); err != nil {
		t.Fatalf("the reference's cotal up after Go served the space: %v", err)
	}
}

// TestReferenceUpOnGoSpace: on a space Go provisioned and its daemon served (fan-out
// durable created, a member's hand-off durable made at its join), the reference's
// provisioning succeeds unchanged: every stream add and consumer add finds the same config.
func TestReferenceUpOnGoSpace(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	runLane(t, m)
	uid := protocol.NewLifecycleUID()
	offlineDelivery(t, m, js, uid, "on the Go space", 1)
	// A member of the role minted by Go: its svc_ durable is the reference's taskDurableConfig.
	if _, err := provision.Agent(t.Context(), js, space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "carol"}, protocol.NewLifecycleUID(), "reviewer"); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the fan-out and reader durables", deadline, func() bool {
		_, err := js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
		_, rerr := js.Consumer(t.Context(), protocol.StreamInbox(space), protocol.ConsumerReader)
		return err == nil && rerr == nil
	})
	// No stream of the reference's createSpaceStreams may be missing: its daemon only binds.
	for _, s := range loadRef(t, uid).Streams {
		var cfg struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(s.Config, &cfg)
		if s.Op == "add" && !strings.HasPrefix(cfg.Name, "KV_") {
			if _, err := js.Stream(t.Context(), cfg.Name); err != nil {
				t.Errorf("stream %s of the reference's space is not on the Go space: %v", cfg.Name, err)
			}
		}
	}
	if err := applyReference(js.Conn(), loadRef(t, uid)); err != nil {
		t.Fatalf("the reference's cotal up on a Go-provisioned space: %v", err)
	}
}
