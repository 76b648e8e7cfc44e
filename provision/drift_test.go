package provision_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
)

// Inspect finds what an operator changed by hand or removed, changes nothing, and Space
// repairs what Inspect calls repairable; a conflict stays a conflict.
func TestInspectFindsDriftAndChangesNothing(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if ds, err := provision.Inspect(ctx, js, "prod", provision.Options{}); err != nil || len(ds) != 0 {
		t.Fatalf("fresh space: drift %+v, err %v; want none", ds, err)
	}

	chat := streamConfig(t, js, "CHAT_prod")
	chat.Duplicates = 10 * time.Second
	if _, err := js.UpdateStream(ctx, chat); err != nil {
		t.Fatalf("edit CHAT: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, "cotal_claims_prod"); err != nil {
		t.Fatalf("delete claims bucket: %v", err)
	}
	ds, err := provision.Inspect(ctx, js, "prod", provision.Options{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	got := map[string]provision.Drift{}
	for _, d := range ds {
		got[d.Name] = d
	}
	if d := got["CHAT_prod"]; len(ds) != 2 || !d.Repairable || len(d.Settings) != 1 || !strings.HasPrefix(d.Settings[0], "duplicate window 10s, want 2m0s") {
		t.Fatalf("drift %+v; want CHAT_prod's duplicate window and the claims bucket", ds)
	}
	if d := got["cotal_claims_prod"]; !d.Missing || !d.Repairable || d.Kind != "bucket" {
		t.Fatalf("claims bucket drift %+v; want missing, repairable", d)
	}
	if c := streamConfig(t, js, "CHAT_prod"); c.Duplicates != 10*time.Second {
		t.Fatalf("inspect changed CHAT's duplicate window to %s", c.Duplicates)
	}

	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if ds, err := provision.Inspect(ctx, js, "prod", provision.Options{}); err != nil || len(ds) != 0 {
		t.Fatalf("after repair: drift %+v, err %v; want none", ds, err)
	}

	// A retention change cannot be repaired in place: a conflict, with the reason.
	task := streamConfig(t, js, "TASK_prod")
	if err := js.DeleteStream(ctx, "TASK_prod"); err != nil {
		t.Fatal(err)
	}
	task.Retention = jetstream.InterestPolicy
	if _, err := js.CreateStream(ctx, task); err != nil {
		t.Fatalf("create a conflicting TASK: %v", err)
	}
	ds, err = provision.Inspect(ctx, js, "prod", provision.Options{})
	if err != nil || len(ds) != 1 || ds[0].Name != "TASK_prod" || ds[0].Repairable || !strings.Contains(ds[0].Why, "retention") {
		t.Fatalf("conflict: drift %+v, err %v; want TASK_prod, not repairable, naming retention", ds, err)
	}
}
