package interop

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/provision"
)

func epStreamsJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(brokertest.Start(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestEPJournalStreamsOfTheReference: EPJ_<s> and EPF_<s> as the reference's
// createEndpointStreams (packages/core/src/endpoint-binding.ts) makes them are what Go
// provisions: a space whose two streams the reference made is left as it is.
func TestEPJournalStreamsOfTheReference(t *testing.T) {
	js := epStreamsJS(t)
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "EPJ_main", Subjects: []string{"cotal.main.epj.>"}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			MaxAge: 24 * time.Hour, Duplicates: 100 * time.Millisecond},
		{Name: "EPF_main", Subjects: []string{"cotal.main.epf.>"}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, AllowDirect: true},
	} {
		if _, err := js.CreateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := provision.Space(t.Context(), js, "main", provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Existing, "EPJ_main") || !slices.Contains(rep.Existing, "EPF_main") || slices.Contains(rep.Updated, "EPJ_main") || slices.Contains(rep.Updated, "EPF_main") {
		t.Fatalf("report %+v: the reference's EPJ/EPF should be taken as they are", rep)
	}
}

// TestEPJournalStreamsUpgrade: a space the current release made (no EPJ, no EPF) gains
// both at the next provisioning, and keeps every stored message.
func TestEPJournalStreamsUpgrade(t *testing.T) {
	js := epStreamsJS(t)
	if _, err := provision.Space(t.Context(), js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"EPJ_main", "EPF_main"} {
		if err := js.DeleteStream(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(t.Context(), "cotal.main.chat.local.alice.general", []byte(`{"id":"m1"}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(t.Context(), js, "main", provision.Options{})
	if err != nil || !slices.Equal(rep.Created, []string{"EPJ_main", "EPF_main"}) {
		t.Fatalf("upgrade: %+v, %v", rep, err)
	}
	st, err := js.Stream(t.Context(), "CHAT_main")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("CHAT_main after the upgrade: %v", err)
	}
	epj, err := js.Stream(t.Context(), "EPJ_main")
	if err != nil {
		t.Fatal(err)
	}
	if c := epj.CachedInfo().Config; c.Duplicates != 100*time.Millisecond || c.MaxAge != 24*time.Hour || c.AllowDirect {
		t.Fatalf("EPJ_main config %+v", c)
	}
}

// TestContractStoreOfTheReference: EPC_<s> as the reference's ensureContractStore
// (packages/core/src/endpoint-binding.ts) makes it is what Go provisions: a space whose
// contract store the reference made is left as it is, its artifacts with it.
func TestContractStoreOfTheReference(t *testing.T) {
	js := epStreamsJS(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "EPC_main", Subjects: []string{"cotal.main.epc.>"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, AllowDirect: true, DenyDelete: true, DenyPurge: true,
		MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "cotal.main.epc.00", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(t.Context(), js, "main", provision.Options{})
	if err != nil || !slices.Contains(rep.Existing, "EPC_main") || slices.Contains(rep.Updated, "EPC_main") {
		t.Fatalf("report %+v (%v): the reference's EPC should be taken as it is", rep, err)
	}
	st, err := js.Stream(t.Context(), "EPC_main")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("EPC_main after provisioning: %v", err)
	}
}

// TestContractStoreUpgrade: a space the current release made (no EPC) gains the
// contract store at the next provisioning, in the reference's config, and keeps every
// stored message.
func TestContractStoreUpgrade(t *testing.T) {
	js := epStreamsJS(t)
	if _, err := provision.Space(t.Context(), js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(t.Context(), "EPC_main"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "cotal.main.chat.local.alice.general", []byte(`{"id":"m1"}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(t.Context(), js, "main", provision.Options{})
	if err != nil || !slices.Equal(rep.Created, []string{"EPC_main"}) {
		t.Fatalf("upgrade: %+v, %v", rep, err)
	}
	st, err := js.Stream(t.Context(), "CHAT_main")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("CHAT_main after the upgrade: %v", err)
	}
	epc, err := js.Stream(t.Context(), "EPC_main")
	if err != nil {
		t.Fatal(err)
	}
	if c := epc.CachedInfo().Config; !c.AllowDirect || !c.DenyDelete || !c.DenyPurge || c.MaxMsgsPerSubject != 1 ||
		c.Discard != jetstream.DiscardNew || !c.DiscardNewPerSubject {
		t.Fatalf("EPC_main config %+v", c)
	}
	// The store is immutable per digest subject: a second write to one is refused.
	if _, err := js.Publish(t.Context(), "cotal.main.epc.01", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "cotal.main.epc.01", []byte(`{"x":1}`)); err == nil {
		t.Fatal("a second artifact at one digest subject was stored")
	}
}
