package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// The reference's agent endpoint watches presence and the channel registry through the two
// watchers a trusted provisioner made for its lifecycle (packages/core/src/subjects.ts
// agentKvWatchConsumerName / agentKvWatchDeliverySubject; graded by the core smokes
// agent-watch-cleanup-auth and the auth smoke's agent rows): it subscribes to each
// watcher's fixed rail, acks every entry, may look the watcher up, and deletes both when it
// stops. These tests play that endpoint with raw nats.go.

// refWatcher is a reference-style binding of one lifecycle's two watchers on nc.
type refWatcher struct {
	nc    *nats.Conn
	space string
	p     protocol.Principal
	uid   string
	rails map[protocol.KVWatch]*nats.Subscription
}

// bindWatchers subscribes to both rails of p's lifecycle uid and looks both watchers up.
func bindWatchers(t *testing.T, nc *nats.Conn, sp string, p protocol.Principal, uid string) *refWatcher {
	t.Helper()
	w := &refWatcher{nc: nc, space: sp, p: p, uid: uid, rails: map[protocol.KVWatch]*nats.Subscription{}}
	for _, k := range protocol.KVWatches {
		sub, err := nc.SubscribeSync(protocol.KVWatchSubject(sp, k, p, uid))
		if err != nil {
			t.Fatal(err)
		}
		w.rails[k] = sub
		rep, err := nc.Request(fmt.Sprintf("$JS.API.CONSUMER.INFO.KV_%s.%s", k.Bucket(sp), protocol.ConsumerKVWatch(k, p, uid)), nil, deadline)
		if err != nil {
			t.Fatalf("watcher info %s: %v", k, err)
		}
		if !bytes.Contains(rep.Data, []byte(`"deliver_subject":"`+sub.Subject+`"`)) {
			t.Fatalf("watcher info %s: %s", k, rep.Data)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.LastError(); err != nil {
		t.Fatalf("bind: %v", err)
	}
	return w
}

// until reads the rail of k, acking every entry as the reference's `m.ack()` does, until an
// entry for key holding want arrives.
func (w *refWatcher) until(t *testing.T, k protocol.KVWatch, key, want string) {
	t.Helper()
	subject := "$KV." + k.Bucket(w.space) + "." + key
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		m, err := w.rails[k].NextMsg(time.Until(end))
		if err != nil {
			break
		}
		if err := m.Respond([]byte("+ACK")); err != nil {
			t.Fatal(err)
		}
		if m.Subject == subject && string(m.Data) == want {
			return
		}
	}
	t.Fatalf("no %s = %s on the %s rail", key, want, k)
}

// stop deletes both watchers, as the reference endpoint's stop does.
func (w *refWatcher) stop(t *testing.T) {
	t.Helper()
	for _, k := range protocol.KVWatches {
		rep, err := w.nc.Request(fmt.Sprintf("$JS.API.CONSUMER.DELETE.KV_%s.%s", k.Bucket(w.space), protocol.ConsumerKVWatch(k, w.p, w.uid)), nil, deadline)
		if err != nil || !bytes.Contains(rep.Data, []byte(`"success":true`)) {
			t.Fatalf("delete watcher %s: %v", k, err)
		}
	}
}

// pending is the number of entries a watcher delivered and has not seen acked.
func ackPending(t *testing.T, js jetstream.JetStream, sp string, k protocol.KVWatch, p protocol.Principal, uid string) int {
	t.Helper()
	c, err := js.PushConsumer(t.Context(), "KV_"+k.Bucket(sp), protocol.ConsumerKVWatch(k, p, uid))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending
}

// TestForeignWatchGoMintedCreds: a reference-style endpoint binds its watchers on a
// credential Go minted (cotal mint, spawn, cotal.yaml all provision through
// provision.Agent), reads the last value of every key and then updates, acks them all, and
// deletes its watchers when it stops.
func TestForeignWatchGoMintedCreds(t *testing.T) {
	m := newDLVMesh(t)
	uid := protocol.NewLifecycleUID()
	alice := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	m.put(protocol.BucketPresence(space), "local.bob", []byte(`{"bob":1}`))
	m.put(protocol.BucketChannels(space), "general", []byte(`{"replay":true}`))
	nc := m.foreign(m.agent("alice", uid, "general"))

	w := bindWatchers(t, nc, space, alice, uid)
	w.until(t, protocol.KVWatchPresence, "local.bob", `{"bob":1}`)
	w.until(t, protocol.KVWatchChannels, "general", `{"replay":true}`)
	m.put(protocol.BucketPresence(space), "local.bob", []byte(`{"bob":2}`))
	w.until(t, protocol.KVWatchPresence, "local.bob", `{"bob":2}`)
	meshtest.Until(t, "every watch entry acked", deadline, func() bool {
		return ackPending(t, m.js, space, protocol.KVWatchPresence, alice, uid) == 0 &&
			ackPending(t, m.js, space, protocol.KVWatchChannels, alice, uid) == 0
	})

	w.stop(t)
	for _, k := range protocol.KVWatches {
		if _, err := m.js.PushConsumer(t.Context(), "KV_"+k.Bucket(space), protocol.ConsumerKVWatch(k, alice, uid)); err != jetstream.ErrConsumerNotFound {
			t.Fatalf("watcher %s after stop: %v", k, err)
		}
	}
	if err := nc.LastError(); err != nil {
		t.Fatalf("the reference-style endpoint was refused: %v", err)
	}
}

// TestForeignWatchCalloutCreds: the same binding on a connection Go's auth callout
// admitted (sentinel creds plus the exchange's bearer); after the endpoint deletes its
// watchers at stop, the next exchange for the same lifecycle makes them again.
func TestForeignWatchCalloutCreds(t *testing.T) {
	m, dir := authLane(t)
	var st struct {
		URL string `json:"url"`
		Cap string `json:"cap"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "auth-service.json"))
	if err != nil || json.Unmarshal(raw, &st) != nil {
		t.Fatalf("auth-service.json: %v", err)
	}
	js := m.Provisioner(authSpace)
	kv, err := js.KeyValue(t.Context(), protocol.BucketPresence(authSpace))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "local.bob", []byte(`{"bob":1}`)); err != nil {
		t.Fatal(err)
	}

	body := bytes.Replace(authFixture(t, "exchange-request-human.json"), []byte("<IdP ID token>"), []byte("idtok"), 1)
	exchangeOnce := func() (*nats.Conn, protocol.Principal, string) {
		code, xr := post(t, st.URL, st.Cap, body)
		if code != 200 {
			t.Fatalf("exchange: %d %v", code, xr)
		}
		token, owner, uid := xr["token"].(string), xr["owner"].(string), xr["lifecycleUid"].(string)
		ibx := "ibx" + strings.ReplaceAll(protocol.NewLifecycleUID(), "-", "")
		nc, err := nats.Connect(m.URL, nats.UserCredentials(filepath.Join(dir, "sentinel.creds")), nats.Token(token), nats.Name(ibx),
			nats.CustomInboxPrefix("_INBOX_"+ibx), nats.Timeout(authDeadline), nats.NoReconnect())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(nc.Close)
		return nc, protocol.Principal{Owner: owner, Actor: "alice"}, uid
	}

	nc, p, uid := exchangeOnce()
	w := bindWatchers(t, nc, authSpace, p, uid)
	w.until(t, protocol.KVWatchPresence, "local.bob", `{"bob":1}`)
	w.stop(t)
	nc.Close()

	nc, p2, uid2 := exchangeOnce()
	if p2 != p || uid2 != uid {
		t.Fatalf("second exchange %s %s, want the same lifecycle %s %s", p2, uid2, p, uid)
	}
	w = bindWatchers(t, nc, authSpace, p, uid)
	if _, err := kv.Put(t.Context(), "local.bob", []byte(`{"bob":2}`)); err != nil {
		t.Fatal(err)
	}
	w.until(t, protocol.KVWatchPresence, "local.bob", `{"bob":2}`)
	if err := nc.LastError(); err != nil {
		t.Fatalf("the reference-style endpoint was refused: %v", err)
	}
}

// TestConsumerFloodLeavesReadersWorking: one credential sends 6000 consumer creates on the
// public buckets and the message streams, in every form (the reference's ordered-watch
// form, its own watcher's name, durables, push consumers delivering into CHAT). The broker
// refuses every one; no consumer is added; another agent's watcher, its Direct Get and a
// live presence subscription keep working.
func TestConsumerFloodLeavesReadersWorking(t *testing.T) {
	m := newDLVMesh(t)
	mallory := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "mallory"}
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	mUID, bUID := protocol.NewLifecycleUID(), protocol.NewLifecycleUID()
	attacker := m.foreign(m.agent("mallory", mUID, "general"))
	reader := m.foreign(m.agent("bob", bUID, "general"))
	before := accountConsumers(t, m.js)

	into := protocol.ChatSubject(space, bob, "general")
	var forms []string
	for _, k := range protocol.KVWatches {
		s, all := "KV_"+k.Bucket(space), "$KV."+k.Bucket(space)+".>"
		forms = append(forms,
			"$JS.API.CONSUMER.CREATE."+s+".oc_%d_1."+all,
			"$JS.API.CONSUMER.CREATE."+s+"."+protocol.ConsumerKVWatch(k, mallory, mUID)+"."+all,
			"$JS.API.CONSUMER.CREATE."+s+".kvw%d",
			"$JS.API.CONSUMER.DURABLE.CREATE."+s+".d%d",
			"$JS.API.CONSUMER.CREATE."+s)
	}
	forms = append(forms, "$JS.API.CONSUMER.CREATE.CHAT_"+space+".x%d", "$JS.API.CONSUMER.DURABLE.CREATE.DM_"+space+".x%d")
	for i := range 6000 {
		f := forms[i%len(forms)]
		subject := f
		if strings.Contains(f, "%d") {
			subject = fmt.Sprintf(f, i)
		}
		b, _ := json.Marshal(map[string]any{"stream_name": "x", "config": map[string]any{
			"name": fmt.Sprintf("x%d", i), "durable_name": fmt.Sprintf("x%d", i), "deliver_subject": into,
			"deliver_policy": "all", "ack_policy": "none", "inactive_threshold": int64(time.Hour)}})
		if err := attacker.PublishRequest(subject, attacker.NewRespInbox(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	if !errorsIsViolation(attacker.LastError()) {
		t.Fatalf("the flood was not refused: %v", attacker.LastError())
	}

	// Every other reader still works: bob's watcher, a Direct Get, a live subscription.
	live, err := reader.SubscribeSync("$KV." + protocol.BucketPresence(space) + ".>")
	if err != nil {
		t.Fatal(err)
	}
	w := bindWatchers(t, reader, space, bob, bUID)
	m.put(protocol.BucketPresence(space), "local.carol", []byte(`{"carol":1}`))
	w.until(t, protocol.KVWatchPresence, "local.carol", `{"carol":1}`)
	if msg, err := live.NextMsg(deadline); err != nil || string(msg.Data) != `{"carol":1}` {
		t.Fatalf("live presence: %v", err)
	}
	get, err := reader.Request("$JS.API.DIRECT.GET.KV_"+protocol.BucketPresence(space)+".$KV."+protocol.BucketPresence(space)+".local.carol", nil, deadline)
	if err != nil || string(get.Data) != `{"carol":1}` {
		t.Fatalf("direct get: %v", err)
	}
	if err := reader.LastError(); err != nil {
		t.Fatalf("reader refused: %v", err)
	}
	if after := accountConsumers(t, m.js); after != before {
		t.Fatalf("the account has %d consumers after the flood, %d before", after, before)
	}
	s, err := m.js.Stream(t.Context(), protocol.StreamChat(space))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("CHAT holds %d messages written for refused push consumers", n)
	}
}

// accountConsumers counts the consumers of the space's account.
func accountConsumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	info, err := js.AccountInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.Consumers
}

// errorsIsViolation reports whether err is the broker's permissions violation.
func errorsIsViolation(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "permissions violation")
}

// TestKVWatchConsumerFixture: the two watchers of one lifecycle, as the reference's
// provisioner makes them (testdata/provision/README.md), decode to the configs Go makes,
// and the consumers Go creates carry exactly those settings.
func TestKVWatchConsumerFixture(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "provision", "kvwatch-consumers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]struct {
		Stream string          `json:"stream"`
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	const uid = "abcdefghijklmnopqrstuvwxyz"
	alice := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	m := newDLVMesh(t)
	if _, err := provision.Agent(t.Context(), m.js, space, alice, uid, ""); err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]protocol.KVWatch{"presence": protocol.KVWatchPresence, "channels": protocol.KVWatchChannels} {
		r, ok := ref[name]
		if !ok {
			t.Fatalf("fixture lacks %s", name)
		}
		var cfg jetstream.ConsumerConfig
		if err := json.Unmarshal(r.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		if want := provision.KVWatchConfig(space, k, alice, uid); !reflect.DeepEqual(cfg, want) || r.Stream != "KV_"+k.Bucket(space) {
			t.Fatalf("%s: fixture %+v on %s\nGo %+v", name, cfg, r.Stream, want)
		}
		info, err := m.js.PushConsumer(t.Context(), r.Stream, cfg.Durable)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := json.Marshal(info.CachedInfo().Config)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeMap(t, stored)
		for key, v := range decodeMap(t, r.Config) {
			if !reflect.DeepEqual(got[key], v) {
				t.Errorf("%s %s: Go's consumer has %v, the reference's %v", name, key, got[key], v)
			}
		}
	}
}

// TestWatchersAddedToEarlierAgent: an agent provisioned by the previous release (its DM
// durable only, a DM waiting in it) gets its two watchers at its next provisioning, and
// the waiting DM is still there.
func TestWatchersAddedToEarlierAgent(t *testing.T) {
	m := newDLVMesh(t)
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	uid := protocol.NewLifecycleUID()
	// What the previous release's provision.Agent made.
	if _, err := m.js.CreateConsumer(t.Context(), protocol.StreamDM(space), jetstream.ConsumerConfig{
		Durable: protocol.ConsumerDM(bob, uid), FilterSubject: protocol.DMFilter(space, bob),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: provision.AckWait, DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.js.Publish(t.Context(), protocol.InstSubject(space, bob, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "a"}), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	rep, err := provision.Agent(t.Context(), m.js, space, bob, uid, "")
	if err != nil {
		t.Fatal(err)
	}
	// It also gains its hand-off durable (dlv_), which this release makes at mint too.
	wantCreated := []string{protocol.ConsumerDLV(bob, uid),
		protocol.ConsumerKVWatch(protocol.KVWatchPresence, bob, uid), protocol.ConsumerKVWatch(protocol.KVWatchChannels, bob, uid)}
	if !reflect.DeepEqual(rep.Existing, []string{protocol.ConsumerDM(bob, uid)}) || !reflect.DeepEqual(rep.Created, wantCreated) {
		t.Fatalf("upgrade report %+v", rep)
	}
	dm, err := m.js.Consumer(t.Context(), protocol.StreamDM(space), protocol.ConsumerDM(bob, uid))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dm.Info(t.Context()); err != nil || info.NumPending != 1 {
		t.Fatalf("the waiting DM after the upgrade: %+v %v", info, err)
	}
	nc := m.foreign(m.Mint(space, trust.UserSpec{Name: "bob", Profile: trust.ProfileAgent, Principal: bob, LifecycleUID: uid}))
	w := bindWatchers(t, nc, space, bob, uid)
	m.put(protocol.BucketPresence(space), "local.carol", []byte(`{"carol":1}`))
	w.until(t, protocol.KVWatchPresence, "local.carol", `{"carol":1}`)
}
