package manager_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// fetchArtifact reads the contract-store artifact of digest sha256:<hex> the way the
// reference's fetchContractArtifact does (a Direct Get, last by its subject) and verifies
// it: its bytes hash to the digest and are their own canonical form.
func fetchArtifact(t *testing.T, nc *nats.Conn, digest string) map[string]any {
	t.Helper()
	h := strings.TrimPrefix(digest, "sha256:")
	req, _ := json.Marshal(map[string]string{"last_by_subj": "cotal." + space + ".epc." + h})
	m, err := nc.Request("$JS.API.DIRECT.GET.EPC_"+space, req, 10*time.Second)
	if err != nil {
		t.Fatalf("artifact %s: %v", digest, err)
	}
	if st := m.Header.Get("Status"); st != "" {
		t.Fatalf("artifact %s: not in the contract store (status %s %s)", digest, st, m.Header.Get("Description"))
	}
	sum := sha256.Sum256(m.Data)
	if hex.EncodeToString(sum[:]) != h {
		t.Fatalf("artifact %s does not hash to its digest", digest)
	}
	var v map[string]any
	if err := json.Unmarshal(m.Data, &v); err != nil {
		t.Fatal(err)
	}
	if c, err := mgrclient.CanonicalJSON(v); err != nil || string(c) != string(m.Data) {
		t.Fatalf("artifact %s is not canonical JSON: %s", digest, m.Data)
	}
	return v
}

// closureRoot reads a one-root closure manifest {v:1, root, members:[]} and its root.
func closureRoot(t *testing.T, nc *nats.Conn, digest string) map[string]any {
	t.Helper()
	man := fetchArtifact(t, nc, digest)
	root, _ := man["root"].(string)
	if man["v"] != float64(1) || root == "" || len(man["members"].([]any)) != 0 {
		t.Fatalf("closure manifest %s: %v", digest, man)
	}
	return fetchArtifact(t, nc, root)
}

// TestReferenceCallerResolvesTheManager: a reference caller's generic invoker (raw
// nats.go doing what endpoint-invoke.ts resolveService and invokeCommand do) describes the
// manager, fetches and verifies its cluster document and command schemas from the
// contract store, invokes spawn and despawn with the digests it read, bound to the
// incarnation that answered; the manager's service record is in the space's records
// bucket while it serves and gone after a clean stop.
func TestReferenceCallerResolvesTheManager(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	harness := fakeHarness(t, mark)
	r := newRig(t, func(m *manager.Manager) {
		harness(m)
		// provision.Space makes the records bucket, as the reference's space setup does; a
		// space made without it (an older cotal) gets one here.
		nc, err := nats.Connect(m.Servers)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.KeyValue(t.Context(), provision.BucketRecords(space)); errors.Is(err, jetstream.ErrBucketNotFound) {
			if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: provision.BucketRecords(space), History: 1, Storage: jetstream.FileStorage}); err != nil {
				t.Fatal(err)
			}
		}
	})
	nc := dial(t, r.url)
	c := newEPCaller(t, nc, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"})

	// describe: no digests pinned.
	subj, data := describe(t, c)
	tok := strings.Split(subj, ".") // cotal.<s>.ep.reply.manager.<instance>.<epoch>....
	instance, epoch := tok[5], tok[6]
	var answer describeAnswer
	if err := json.Unmarshal(data, &answer); err != nil || answer.Descriptor.Endpoint != "manager" || answer.Descriptor.Owner != "local" ||
		answer.Descriptor.Protocol.V != 1 || len(answer.Descriptor.Clusters) != 1 || instance != manager.InstanceID("testhost") {
		t.Fatalf("describe answered %s on %s (%v)", data, subj, err)
	}

	// The cluster document, verified, and each command's schemas recompiled to the
	// digests the reference's own contract pins.
	doc := closureRoot(t, nc, answer.Descriptor.Clusters[0].Digest)
	if doc["urn"] != "ai.cotal.manager" {
		t.Fatalf("cluster document %v", doc)
	}
	pins := map[string][2]string{}
	for _, raw := range doc["commands"].([]any) {
		cmd := raw.(map[string]any)
		name := cmd["name"].(string)
		in, out := cmd["inputDigest"].(string), cmd["outputDigest"].(string)
		for _, d := range []string{in, out} {
			schema := closureRoot(t, nc, d)
			if mgrclient.ClosureDigest(mustJSON(t, schema)) != d {
				t.Fatalf("%s: schema closure %s does not recompile to its digest", name, d)
			}
		}
		if want, ok := refDigests[name]; ok && (want[0] != in || want[1] != out) {
			t.Errorf("%s: the store's digests %s %s are not the reference's %s %s", name, in, out, want[0], want[1])
		}
		pins[name] = [2]string{in, out}
	}
	if _, ok := pins["spawn"]; !ok || !strings.Contains(strings.Join(answer.Descriptor.Clusters[0].Commands, ","), "despawn") {
		t.Fatalf("described commands %v", answer.Descriptor.Clusters[0].Commands)
	}

	// invokeCommand: the resolved digests pinned, bound to the incarnation that answered.
	ep, _ := strconv.ParseUint(epoch, 10, 64)
	bind := map[string]any{"instanceId": instance, "epoch": ep}
	spawn := c.request("spawn-1", "spawn", map[string]any{"name": "w1", "agent": "claude"}, nil)
	spawn["op"] = map[string]any{"endpoint": "manager", "command": "spawn", "inputDigest": pins["spawn"][0], "outputDigest": pins["spawn"][1]}
	spawn["bind"] = bind
	_, rep, err := c.send("spawn", "", nil, spawn)
	var spawned mgrclient.EPSpawnResult
	if err != nil || !rep.OK || json.Unmarshal(rep.Data, &spawned) != nil || spawned.Name != "w1" {
		t.Fatalf("spawn: %+v %s, %v", rep, rep.Data, err)
	}
	despawn := c.request("stop-1", "despawn", map[string]any{"graceful": true}, map[string]any{"owner": "local", "actor": "w1", "lifecycleUid": spawned.UID})
	despawn["bind"] = bind
	if _, rep, err = c.send("despawn", "any", []string{"local"}, despawn); err != nil || !rep.OK {
		t.Fatalf("despawn: %+v, %v", rep, err)
	}

	// The service record (endpoint-service.ts ServiceSpec, ServiceStatus).
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), provision.BucketRecords(space))
	if err != nil {
		t.Fatal(err)
	}
	key := "svc.manager." + instance
	se, err := kv.Get(t.Context(), key+".spec")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	if got, want := string(se.Value()), `{"endpoint":"manager","owner":"local","clusterDigests":["`+answer.Descriptor.Clusters[0].Digest+`"],"protocol":{"v":1}}`; got != want {
		t.Errorf("spec %s, want %s", got, want)
	}
	st, err := kv.Get(t.Context(), key+".status")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if got, want := string(st.Value()), `{"epoch":`+epoch+`,"state":"ready","observedSpecRevision":`+strconv.FormatUint(se.Revision(), 10)+`}`; got != want {
		t.Errorf("status %s, want %s", got, want)
	}

	// A clean stop removes it.
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, k := range []string{key + ".spec", key + ".status"} {
		if _, err := kv.Get(ctx, k); err == nil {
			t.Errorf("%s still there after a clean stop", k)
		}
	}
}

type describeAnswer struct {
	Descriptor struct {
		Endpoint, Owner string
		Protocol        struct{ V int }
		Clusters        []struct {
			Digest   string
			Commands []string
		}
	}
}

// describe asks the reserved describe command as the reference's describeEndpoint does
// (no digests pinned) and returns the reply subject and data.
func describe(t *testing.T, c *epCaller) (string, json.RawMessage) {
	t.Helper()
	req := map[string]any{"v": 1, "id": "describe-1", "op": map[string]any{"endpoint": "manager", "command": "describe"},
		"class": "ephemeral", "replyExpected": true, "deadlineMs": 10000, "from": map[string]any{"id": c.me.String(), "name": c.me.Actor}}
	subj, rep, err := c.send("describe", "", nil, req)
	if err != nil || !rep.OK || rep.ID != "describe-1" {
		t.Fatalf("describe: %+v, %v", rep, err)
	}
	return subj, rep.Data
}

// describeManager is the closure digest of the manager's one cluster.
func describeManager(t *testing.T, c *epCaller) string {
	t.Helper()
	_, data := describe(t, c)
	var a describeAnswer
	if err := json.Unmarshal(data, &a); err != nil || len(a.Descriptor.Clusters) != 1 {
		t.Fatalf("describe answered %s (%v)", data, err)
	}
	return a.Descriptor.Clusters[0].Digest
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
