package interop

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
)

// TestLeaseRow: Go reads the reference's lease.0, and the one a Go daemon writes has the
// reference's fields (host and pid are Go extensions the reference ignores).
func TestLeaseRow(t *testing.T) {
	m := newDLVMesh(t)
	m.put(protocol.BucketDelivery(space), protocol.LeaseKey, fixture(t, "lease.json"))
	info, ok, err := delivery.ReadLease(t.Context(), m.js, space)
	if err != nil || !ok || info.Holder != "local.cotal_delivery" || info.Instance != "3f1c2a4e-8d1b-4a57-9d1e-2b7f4c0a9e11" || !info.Ready || info.Since != 1700000000000 {
		t.Fatalf("reference lease read as %+v, %v, %v", info, ok, err)
	}
	kv, err := m.js.KeyValue(t.Context(), protocol.BucketDelivery(space))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(t.Context(), protocol.LeaseKey); err != nil {
		t.Fatal(err)
	}
	m.serve()
	var row map[string]any
	if err := json.Unmarshal(m.get(protocol.BucketDelivery(space), protocol.LeaseKey), &row); err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	_ = json.Unmarshal(fixture(t, "lease.json"), &ref)
	for k := range ref {
		if _, ok := row[k]; !ok {
			t.Errorf("Go lease row %v lacks %q", row, k)
		}
	}
	for k := range row {
		if _, ok := ref[k]; !ok && k != "host" && k != "pid" {
			t.Errorf("Go lease row has %q", k)
		}
	}
	if row["ready"] != true || row["holder"] != "local.cotal_delivery" {
		t.Fatalf("Go lease row %v", row)
	}
}

// TestLivenessRequest: the auth service's planeConnLiveness request is the reference's,
// {query: {ledger, records}}, field for field (a raw nats.go responder reads it).
func TestLivenessRequest(t *testing.T) {
	m := newDLVMesh(t)
	from := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_auth"}
	nc := m.Connect(m.Mint(space, meshtest.ProvisionerSpec("cotal_auth")))
	got := make(chan []byte, 1)
	sub, err := nc.Subscribe("cotal."+space+".ctl.delivery-admin.local.cotal_auth", func(msg *nats.Msg) {
		got <- msg.Data
		_ = msg.Respond([]byte(`{"ok":false,"error":"test responder"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	tuple := func(cid uint64) protocol.ConnTuple {
		return protocol.ConnTuple{ServerID: "NSERVER", CID: cid, UserNkey: "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	}
	o := &plane.DaemonOracle{Conn: nc, Space: space, From: from, Timeout: deadline}
	if _, err := o.Liveness(t.Context(), protocol.LivenessArgs{Ledger: tuple(7), Records: tuple(8)}); err == nil {
		t.Fatal("the test responder's refusal was not reported")
	}
	sameJSON(t, "planeConnLiveness request", <-got, fixture(t, "planeConnLiveness.request.json"))
}
