package provision_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
)

// The timer plane's streams are shaped as the reference makes them (schedules off on the
// request stream, on for the armed one), a space provisioned before they existed gains
// them at the next Space, and an EPT made without message schedules is repaired in place.
func TestSpaceTimerStreams(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	req := streamConfig(t, js, "EPT_REQ_prod")
	if !slices.Equal(req.Subjects, []string{"cotal.prod.ept.*.*.*.*.schedule"}) || req.AllowMsgSchedules ||
		req.MaxAge != provision.EPIngressMaxAge || req.Retention != jetstream.LimitsPolicy || req.Storage != jetstream.FileStorage {
		t.Errorf("EPT_REQ_prod config %+v, want the .schedule subjects, no schedules, limits, file, a day's age", req)
	}
	ept := streamConfig(t, js, "EPT_prod")
	if !slices.Equal(ept.Subjects, []string{"cotal.prod.ept.*.*.*.*.armed", "cotal.prod.ept.*.*.*.*.fire"}) || !ept.AllowMsgSchedules ||
		!ept.AllowRollup || ept.MaxAge != provision.EPTimerMaxAge {
		t.Errorf("EPT_prod config %+v, want .armed and .fire, schedules and rollup on, 31 days", ept)
	}
	for _, s := range []string{"EPT_REQ_prod", "EPT_prod"} {
		if err := js.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// An EPT someone made without schedules: fires would never come.
	_, bare := provision.TimerStreams("prod")
	bare.AllowMsgSchedules, bare.AllowRollup = false, false
	if _, err := js.CreateStream(ctx, bare); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(ctx, js, "prod", provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Created, []string{"EPT_REQ_prod"}) || !slices.Equal(rep.Updated, []string{"EPT_prod"}) {
		t.Fatalf("report %+v, want EPT_REQ_prod created and EPT_prod updated", rep)
	}
	if !streamConfig(t, js, "EPT_prod").AllowMsgSchedules {
		t.Fatal("EPT_prod still has message schedules off")
	}
}
