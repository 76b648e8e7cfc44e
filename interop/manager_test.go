package interop

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The manager's control surface in the reference's contract (docs/interop.md item 6;
// fixtures in testdata/manager, each row of its README naming the reference function).

func mgrFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "manager", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	c, err := mgrclient.CanonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

// TestManagerEPSubjects: Go parses the reference's request subjects (epRequestSubject),
// builds the same ones, and derives the reference's reply subject (deriveReplySubject).
func TestManagerEPSubjects(t *testing.T) {
	root := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	spawn, ok := mgrclient.ParseEPSubject("main", string(mgrFixture(t, "spawn.request.subject")))
	if !ok || spawn.Route != mgrclient.EPRouteOne || spawn.Command != "spawn" || spawn.Mode != "" || spawn.Caller != root {
		t.Fatalf("spawn subject parsed as %+v, %v", spawn, ok)
	}
	if got := mgrclient.EPRequestSubject("main", spawn.Route, "", "spawn", "", nil, root, spawn.UID, spawn.Nonce); got != string(mgrFixture(t, "spawn.request.subject")) {
		t.Errorf("Go builds %s", got)
	}
	if got := mgrclient.EPReplySubject("main", spawn, manager.InstanceID("testhost"), 7); got != string(mgrFixture(t, "spawn.reply.subject")) {
		t.Errorf("Go answers on %s, want %s", got, mgrFixture(t, "spawn.reply.subject"))
	}
	despawn, ok := mgrclient.ParseEPSubject("main", string(mgrFixture(t, "despawn.request.subject")))
	if !ok || despawn.Route != mgrclient.EPRouteInst || despawn.Instance != manager.InstanceID("testhost") || despawn.Command != "despawn" ||
		despawn.Mode != "any" || len(despawn.Target) != 1 || despawn.Target[0] != "local" || despawn.Caller != root {
		t.Fatalf("despawn subject parsed as %+v, %v", despawn, ok)
	}
	if got := mgrclient.EPRequestSubject("main", mgrclient.EPRouteInst, despawn.Instance, "despawn", "any", []string{"local"}, root, despawn.UID, despawn.Nonce); got != string(mgrFixture(t, "despawn.request.subject")) {
		t.Errorf("Go builds %s", got)
	}
	for _, bad := range []string{
		"cotal.main.ep.one.manager.spawn.local.root.short.Qm9vYmFyQmF6UXV4Tm9uY2UwMQ",                              // uid grammar
		"cotal.main.ep.one.manager.despawn.any.local.root.k3v9q2m8x7w1p4n6b5c0d2f8g1h3.Qm9vYmFyQmF6UXV4Tm9uY2UwMQ", // mode arity
		"cotal.main.ep.one.delivery.spawn.local.root.k3v9q2m8x7w1p4n6b5c0d2f8g1h3.Qm9vYmFyQmF6UXV4Tm9uY2UwMQ",      // another endpoint
	} {
		if s, ok := mgrclient.ParseEPSubject("main", bad); ok {
			t.Errorf("%s parsed as %+v", bad, s)
		}
	}
}

// TestManagerEPEnvelopes: Go decodes the reference's requests (parseEndpointRequest) with
// the digests it computes itself for the manager's contract, and its replies encode to
// the reference's bytes.
func TestManagerEPEnvelopes(t *testing.T) {
	for _, name := range []string{"spawn.request.json", "despawn.request.json"} {
		b := mgrFixture(t, name)
		r, perr := mgrclient.ParseEPRequest(b)
		if perr != nil {
			t.Fatalf("%s: %v", name, perr)
		}
		in, out, ok := mgrclient.EPContractDigests(r.Op.Command)
		if !ok || r.Op.InputDigest != in || r.Op.OutputDigest != out {
			t.Errorf("%s pins %s %s; Go's contract has %s %s", name, r.Op.InputDigest, r.Op.OutputDigest, in, out)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if canonical(t, again) != canonical(t, b) {
			t.Errorf("%s: Go encodes %s", name, again)
		}
	}
	for _, tc := range []struct {
		name string
		data any
	}{
		{"spawn.reply.json", &mgrclient.EPSpawnResult{}},
		{"despawn.reply.json", &mgrclient.EPStopResult{}},
		{"denied.reply.json", nil},
	} {
		b := mgrFixture(t, tc.name)
		var r mgrclient.EPReply
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.data != nil {
			if err := json.Unmarshal(r.Data, tc.data); err != nil {
				t.Fatalf("%s data: %v", tc.name, err)
			}
			d, _ := json.Marshal(tc.data)
			r.Data = d
		}
		again, _ := json.Marshal(r)
		if !bytes.Equal(again, b) {
			t.Errorf("%s: Go encodes\n%s\nwant\n%s", tc.name, again, b)
		}
	}
}

// TestManagerLeaseRows: the reference's lease.<instanceId> row reads and encodes to the
// same bytes, and ReadLease finds a Go manager's row in either form.
func TestManagerLeaseRows(t *testing.T) {
	ref := mgrFixture(t, "lease.json")
	var info manager.LeaseInfo
	if err := json.Unmarshal(ref, &info); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(info); !bytes.Equal(b, ref) {
		t.Errorf("Go encodes %s, want %s", b, ref)
	}

	url := brokertest.Start(t).ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), protocol.BucketManager("main"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "lease.testhost", mgrFixture(t, "lease-legacy.json")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := manager.ReadLease(t.Context(), js, "main", "testhost")
	if err != nil || !ok || got.Host != "testhost" || got.PID != 4242 || got.Since != 1700000000000 {
		t.Fatalf("older row read as %+v, %v, %v", got, ok, err)
	}
	if _, err := kv.Put(t.Context(), manager.LeaseKey(manager.InstanceID("testhost")), ref); err != nil {
		t.Fatal(err)
	}
	got, ok, err = manager.ReadLease(t.Context(), js, "main", "testhost")
	if err != nil || !ok || got != info {
		t.Fatalf("reference row read as %+v, %v, %v", got, ok, err)
	}
}
