package provision_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
)

// The workflow run stores are shaped as the reference makes them, and a space provisioned
// before they existed gains them at the next Space, keeping everything else.
func TestSpaceRunStores(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	wfj := streamConfig(t, js, "WFJ_prod")
	if !slices.Equal(wfj.Subjects, []string{"cotal.prod.wfj.*"}) || wfj.MaxAge != 0 || wfj.AllowDirect ||
		wfj.Retention != jetstream.LimitsPolicy || wfj.Storage != jetstream.FileStorage {
		t.Errorf("WFJ_prod config %+v, want cotal.prod.wfj.*, limits, file, no max age, no direct get", wfj)
	}
	rec := streamConfig(t, js, "KV_cotal_records_prod")
	if !rec.AllowDirect || rec.AllowRollup || !rec.DenyDelete || !rec.DenyPurge || rec.MaxMsgsPerSubject != 1 {
		t.Errorf("records bucket direct %v rollup %v deny delete %v deny purge %v history %d; want true false true true 1",
			rec.AllowDirect, rec.AllowRollup, rec.DenyDelete, rec.DenyPurge, rec.MaxMsgsPerSubject)
	}
	adm := streamConfig(t, js, "KV_cotal_admission_prod")
	if adm.AllowDirect || adm.AllowRollup || !adm.DenyDelete || !adm.DenyPurge || adm.MaxAge != 0 {
		t.Errorf("admission bucket direct %v rollup %v deny delete %v deny purge %v max age %s; want false false true true 0",
			adm.AllowDirect, adm.AllowRollup, adm.DenyDelete, adm.DenyPurge, adm.MaxAge)
	}
	for _, s := range []string{"WFJ_prod", "KV_cotal_records_prod", "KV_cotal_admission_prod"} {
		if err := js.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := provision.Space(ctx, js, "prod", provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Created, []string{"WFJ_prod", provision.BucketRecords("prod"), provision.BucketAdmission("prod")}) || len(rep.Updated) != 0 {
		t.Fatalf("report %+v, want only the three run stores created", rep)
	}
}
