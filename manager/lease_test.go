package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/workspace"
)

// legacyRig is a provisioned space whose manager bucket holds row under the key an older
// cotal's manager of host testhost wrote (lease.testhost), and a manager not yet started.
func legacyRig(t *testing.T, row map[string]any) (jetstream.KeyValue, *manager.Manager) {
	t.Helper()
	url := brokertest.Start(t).ClientURL()
	js, err := jetstream.New(dial(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), protocol.BucketManager(space))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(row)
	if _, err := kv.Put(t.Context(), "lease.testhost", b); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	return kv, &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, url, client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint})
		},
		Project: project(t), Space: space, Servers: url, Exe: exe, Host: "testhost",
		Operator: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"},
		Logger:   slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
}

// TestLegacyLeaseRowOfLiveManagerHolds: a manager of an older cotal still running on this
// host (its lease.<host> row, its process alive) keeps the host's lease: the new manager
// refuses to start beside it and leaves its row alone.
func TestLegacyLeaseRowOfLiveManagerHolds(t *testing.T) {
	me, err := workspace.ProcessRecord(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The row's holder is this test process: alive.
	kv, m := legacyRig(t, map[string]any{"instance": "testhost-1-1", "host": "testhost", "pid": me.PID, "start": me.Start, "since": time.Now().UnixMilli()})
	err = m.Run(t.Context(), func() { t.Error("the manager served beside a live older manager") })
	if !errors.Is(err, manager.ErrLeaseHeld) {
		t.Fatalf("run: %v, want ErrLeaseHeld", err)
	}
	if _, err := kv.Get(t.Context(), "lease.testhost"); err != nil {
		t.Fatalf("the live older manager's row: %v", err)
	}
	if _, err := kv.Get(t.Context(), manager.LeaseKey(manager.InstanceID("testhost"))); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a new row was written beside it: %v", err)
	}
}

// TestLegacyLeaseRowOfGoneManagerIsCleared: the row of an older manager whose process is
// gone is deleted at the upgrade, and the new manager's row is lease.<instanceId> in the
// reference's form, released when it stops.
func TestLegacyLeaseRowOfGoneManagerIsCleared(t *testing.T) {
	// The row names this process's pid with another start time: a process that is gone.
	kv, m := legacyRig(t, map[string]any{"instance": "testhost-1-1", "host": "testhost", "pid": os.Getpid(), "start": "1", "since": time.Now().UnixMilli()})
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- m.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the manager did not serve")
	}
	if _, err := kv.Get(t.Context(), "lease.testhost"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the gone older manager's row: %v", err)
	}
	key := manager.LeaseKey(manager.InstanceID("testhost"))
	e, err := kv.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal(e.Value(), &row); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"holder", "instanceId", "runtime", "root", "pid", "since"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row %s has no %s", e.Value(), k)
		}
	}
	if row["holder"] != "local.manager" || row["instanceId"] != manager.InstanceID("testhost") || row["runtime"] != "pty" || row["root"] != m.Project.Root {
		t.Errorf("row %s", e.Value())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the row outlived its manager: %v", err)
	}
}
