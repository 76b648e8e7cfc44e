package provision_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

func names(space string) []string {
	return []string{
		"CHAT_" + space, "DM_" + space, "TASK_" + space,
		"cotal_presence_" + space, "cotal_channels_" + space,
		"INBOX_" + space, "DLV_" + space, "cotal_delivery_" + space, "cotal_manager_" + space, "cotal_members_" + space, "cotal_acl_" + space,
		"cotal_auth_" + space, "cotal_claims_" + space, "EPJ_" + space, "EPF_" + space, "EPC_" + space, "cotal_tasks_" + space,
		"WFJ_" + space, "cotal_records_" + space, "cotal_admission_" + space, "cotal_a2a_" + space, "cotal_a2apeers_" + space, "EPT_REQ_" + space, "EPT_" + space, "cotal_channels_" + space + "/=defaults",
	}
}

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo().Config
}

func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	l := js.StreamNames(t.Context())
	var out []string
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	slices.Sort(out)
	return out
}

func TestSpaceCreatesFootprint(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	rep, err := provision.Space(ctx, js, "prod", provision.Options{})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if !slices.Equal(rep.Created, names("prod")) || len(rep.Updated)+len(rep.Existing) != 0 {
		t.Fatalf("report %+v, want all created: %v", rep, names("prod"))
	}

	type want struct {
		name       string
		subject    string
		retention  jetstream.RetentionPolicy
		perSubject int64
		direct     bool
		discard    jetstream.DiscardPolicy
		maxAge     time.Duration
		dup        time.Duration
	}
	for _, w := range []want{
		{"CHAT_prod", "cotal.prod.chat.>", jetstream.LimitsPolicy, 1000, true, jetstream.DiscardOld, 0, 2 * time.Minute},
		{"DM_prod", "cotal.prod.inst.>", jetstream.LimitsPolicy, -1, false, jetstream.DiscardOld, 0, 2 * time.Minute},
		{"TASK_prod", "cotal.prod.svc.>", jetstream.WorkQueuePolicy, -1, false, jetstream.DiscardOld, 0, 2 * time.Minute},
		{"KV_cotal_presence_prod", "$KV.cotal_presence_prod.>", jetstream.LimitsPolicy, 1, true, jetstream.DiscardNew, protocol.LivenessWindow, protocol.LivenessWindow},
		{"KV_cotal_channels_prod", "$KV.cotal_channels_prod.>", jetstream.LimitsPolicy, 1, true, jetstream.DiscardNew, 0, 2 * time.Minute},
		{"DLV_prod", "cotal.prod.dlv.>", jetstream.LimitsPolicy, 1000, false, jetstream.DiscardOld, 0, 2 * time.Hour},
		{"KV_cotal_delivery_prod", "$KV.cotal_delivery_prod.>", jetstream.LimitsPolicy, 1, true, jetstream.DiscardNew, 30 * time.Second, 30 * time.Second},
		{"KV_cotal_members_prod", "$KV.cotal_members_prod.>", jetstream.LimitsPolicy, 1, true, jetstream.DiscardNew, 0, 2 * time.Minute},
		{"KV_cotal_acl_prod", "$KV.cotal_acl_prod.>", jetstream.LimitsPolicy, 1, true, jetstream.DiscardNew, 0, 2 * time.Minute},
		{"KV_cotal_auth_prod", "$KV.cotal_auth_prod.>", jetstream.LimitsPolicy, 1, false, jetstream.DiscardNew, 0, 2 * time.Minute},
	} {
		c := streamConfig(t, js, w.name)
		if !slices.Equal(c.Subjects, []string{w.subject}) || c.Retention != w.retention || c.Storage != jetstream.FileStorage ||
			c.Replicas != 1 || c.MaxMsgsPerSubject != w.perSubject || c.AllowDirect != w.direct || c.Discard != w.discard ||
			c.MaxAge != w.maxAge || c.Duplicates != w.dup || c.MaxMsgs != -1 || c.MaxBytes != -1 {
			t.Errorf("%s config %+v, want %+v", w.name, c, w)
		}
	}
	if c := streamConfig(t, js, "KV_cotal_channels_prod"); !c.AllowRollup {
		t.Errorf("channels bucket does not allow rollup")
	}
	// Presence refuses rollup: one agent's put on its own key must not purge the others.
	if c := streamConfig(t, js, "KV_cotal_presence_prod"); c.AllowRollup || c.DenyDelete || c.MaxConsumers != -1 || c.MaxMsgSize != -1 {
		t.Errorf("presence bucket rollup %v, deny delete %v, max consumers %d, max msg size %d; want false, false, -1, -1",
			c.AllowRollup, c.DenyDelete, c.MaxConsumers, c.MaxMsgSize)
	}
	// Every bucket allows deletes, as the reference makes them (nats.go's KV API denies them).
	for _, b := range []string{"presence", "channels", "delivery", "members", "acl", "auth"} {
		if c := streamConfig(t, js, "KV_cotal_"+b+"_prod"); c.DenyDelete || c.DenyPurge || c.MaxConsumers != -1 || c.MaxMsgSize != -1 {
			t.Errorf("%s bucket deny delete %v, deny purge %v, max consumers %d, max msg size %d; want false, false, -1, -1",
				b, c.DenyDelete, c.DenyPurge, c.MaxConsumers, c.MaxMsgSize)
		}
	}
	// The auth bucket takes per-message TTLs (reference ensureAuthorityStores verifies it).
	if c := streamConfig(t, js, "KV_cotal_auth_prod"); !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != time.Hour || c.AllowDirect || !c.AllowRollup {
		t.Errorf("auth bucket allow msg ttl %v, marker ttl %s, direct %v, rollup %v; want true, 1h, false, true",
			c.AllowMsgTTL, c.SubjectDeleteMarkerTTL, c.AllowDirect, c.AllowRollup)
	}
	presence, err := js.KeyValue(ctx, "cotal_presence_prod")
	if err != nil {
		t.Fatalf("presence bucket binds as a bucket: %v", err)
	}
	if _, err := presence.Put(ctx, "local.alice", []byte("{}")); err != nil {
		t.Fatalf("put presence: %v", err)
	}
	if e, err := presence.Get(ctx, "local.alice"); err != nil || string(e.Value()) != "{}" {
		t.Fatalf("get presence: %v", err)
	}
	rollup := nats.NewMsg("$KV.cotal_presence_prod.local.bob")
	rollup.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	if _, err := js.PublishMsg(ctx, rollup); err == nil {
		t.Error("a rollup put on the presence bucket was stored")
	}
	if _, err := presence.Get(ctx, "local.alice"); err != nil {
		t.Errorf("alice's presence after a refused rollup: %v", err)
	}
	auth, err := js.KeyValue(ctx, provision.BucketAuth("prod"))
	if err != nil {
		t.Fatalf("auth bucket: %v", err)
	}
	if _, err := auth.Put(ctx, "actor.alice", []byte("{}")); err != nil {
		t.Fatalf("put into auth bucket: %v", err)
	}
	if e, err := auth.Get(ctx, "actor.alice"); err != nil || string(e.Value()) != "{}" {
		t.Fatalf("get from auth bucket without direct get: %v", err)
	}
	if c := streamConfig(t, js, "CHAT_prod"); c.AllowRollup || c.DenyDelete || c.DenyPurge {
		t.Errorf("CHAT_prod rollup/deny flags %v/%v/%v, want all false", c.AllowRollup, c.DenyDelete, c.DenyPurge)
	}

	d, err := provision.ChannelDefaults(ctx, js, "prod")
	if err != nil {
		t.Fatalf("channel defaults: %v", err)
	}
	if d.DeliveryClass != provision.ClassDurable || d.EffectiveDeliveryClass() != provision.ClassDurable || !d.EffectiveReplay() {
		t.Fatalf("defaults %+v, want deliveryClass durable and replay on", d)
	}
	kv, err := js.KeyValue(ctx, "cotal_channels_prod")
	if err != nil {
		t.Fatalf("channels bucket: %v", err)
	}
	e, err := kv.Get(ctx, protocol.ChannelDefaultsKey)
	if err != nil {
		t.Fatalf("get =defaults: %v", err)
	}
	if string(e.Value()) != `{"deliveryClass":"durable"}` {
		t.Fatalf("=defaults holds %s", e.Value())
	}
}

func TestSpaceLiveDefaults(t *testing.T) {
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, "open", provision.Options{DefaultDeliveryClass: provision.ClassLive}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	d, err := provision.ChannelDefaults(t.Context(), js, "open")
	if err != nil || d.EffectiveDeliveryClass() != provision.ClassLive {
		t.Fatalf("defaults %+v, err %v, want live", d, err)
	}
}

func TestSpaceTwiceKeepsEverything(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "prod", provision.Options{}); err != nil {
		t.Fatalf("first provision: %v", err)
	}
	alice := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	for _, subj := range []string{
		protocol.ChatSubject("prod", alice, "general"),
		protocol.InstSubject("prod", bob, alice),
		protocol.SvcSubject("prod", "review", alice),
	} {
		if _, err := js.Publish(ctx, subj, []byte("kept")); err != nil {
			t.Fatalf("publish %s: %v", subj, err)
		}
	}
	kv, err := js.KeyValue(ctx, "cotal_channels_prod")
	if err != nil {
		t.Fatalf("channels bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "general", []byte(`{"replay":true}`)); err != nil {
		t.Fatalf("put channel: %v", err)
	}

	rep, err := provision.Space(ctx, js, "prod", provision.Options{DefaultDeliveryClass: provision.ClassLive})
	if err != nil {
		t.Fatalf("second provision: %v", err)
	}
	if !slices.Equal(rep.Existing, names("prod")) || len(rep.Created)+len(rep.Updated) != 0 {
		t.Fatalf("report %+v, want all existing", rep)
	}
	for _, name := range []string{"CHAT_prod", "DM_prod", "TASK_prod"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("%s holds %d messages after re-provisioning, want 1", name, n)
		}
	}
	if e, err := kv.Get(ctx, "general"); err != nil || string(e.Value()) != `{"replay":true}` {
		t.Errorf("channel entry after re-provisioning: %v, %v", e, err)
	}
	if d, err := provision.ChannelDefaults(ctx, js, "prod"); err != nil || d.DeliveryClass != provision.ClassDurable {
		t.Errorf("defaults %+v, err %v: the second run must not overwrite durable with live", d, err)
	}
}

func TestSpaceKeepsExistingDefaults(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cotal_channels_team", History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatalf("create channels bucket: %v", err)
	}
	const mine = `{"replay":false,"replayWindow":"1h","deliveryClass":"live"}`
	if _, err := kv.Put(ctx, protocol.ChannelDefaultsKey, []byte(mine)); err != nil {
		t.Fatalf("put defaults: %v", err)
	}
	rep, err := provision.Space(ctx, js, "team", provision.Options{DefaultDeliveryClass: provision.ClassDurable})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if !slices.Contains(rep.Existing, "cotal_channels_team") || !slices.Contains(rep.Existing, "cotal_channels_team/=defaults") {
		t.Fatalf("report %+v, want the bucket and =defaults existing", rep)
	}
	e, err := kv.Get(ctx, protocol.ChannelDefaultsKey)
	if err != nil || string(e.Value()) != mine {
		t.Fatalf("=defaults is %v (err %v), want it unchanged: %s", e, err, mine)
	}
	d, err := provision.ChannelDefaults(ctx, js, "team")
	if err != nil || d.Replay == nil || *d.Replay || d.ReplayWindow != "1h" || d.DeliveryClass != provision.ClassLive {
		t.Fatalf("defaults %+v, err %v", d, err)
	}
}

func TestSpaceRefusesBadInput(t *testing.T) {
	js := meshtest.JetStream(t)
	for _, space := range []string{"", "a.b", "has space", "x>", "*"} {
		_, err := provision.Space(t.Context(), js, space, provision.Options{})
		if !errors.Is(err, protocol.ErrInvalidSpace) {
			t.Errorf("space %q: %v, want ErrInvalidSpace", space, err)
		}
	}
	if _, err := provision.Space(t.Context(), js, "ok", provision.Options{DefaultDeliveryClass: "sometimes"}); err == nil ||
		!strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("bad delivery class: %v, want an error naming it", err)
	}
	if got := streamNames(t, js); len(got) != 0 {
		t.Fatalf("streams after refused input: %v, want none", got)
	}
}

func TestSpaceRefusesConflictingStream(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	mine := jetstream.StreamConfig{Name: "CHAT_x", Subjects: []string{"elsewhere.>"}, Storage: jetstream.FileStorage}
	if _, err := js.CreateStream(ctx, mine); err != nil {
		t.Fatalf("create CHAT_x by hand: %v", err)
	}
	if _, err := js.Publish(ctx, "elsewhere.one", []byte("mine")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	before := streamConfig(t, js, "CHAT_x")

	_, err := provision.Space(ctx, js, "x", provision.Options{})
	if !errors.Is(err, provision.ErrConflict) {
		t.Fatalf("provision over a foreign CHAT_x: %v, want ErrConflict", err)
	}
	msg := err.Error()
	for _, part := range []string{`provision space "x": stream CHAT_x:`, "subjects [elsewhere.>], want [cotal.x.chat.>]", "nothing was changed"} {
		if !strings.Contains(msg, part) {
			t.Errorf("error %q lacks %q", msg, part)
		}
	}
	after := streamConfig(t, js, "CHAT_x")
	if !slices.Equal(before.Subjects, after.Subjects) || before.Retention != after.Retention || before.MaxMsgsPerSubject != after.MaxMsgsPerSubject {
		t.Errorf("CHAT_x changed: %+v -> %+v", before, after)
	}
	st, err := js.Stream(ctx, "CHAT_x")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Errorf("CHAT_x lost its message: %v", err)
	}
	if got := streamNames(t, js); !slices.Equal(got, []string{"CHAT_x"}) {
		t.Errorf("streams after a conflict: %v, want only CHAT_x", got)
	}
}

func TestSpaceRefusesSubjectsHeldElsewhere(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"cotal.y.inst.>"}}); err != nil {
		t.Fatalf("create OTHER: %v", err)
	}
	_, err := provision.Space(ctx, js, "y", provision.Options{})
	if !errors.Is(err, provision.ErrConflict) || !strings.Contains(err.Error(), "stream DM_y:") || !strings.Contains(err.Error(), "stream OTHER") {
		t.Fatalf("provision with DM subjects held by OTHER: %v, want a conflict naming DM_y and OTHER", err)
	}
	if got := streamNames(t, js); !slices.Equal(got, []string{"OTHER"}) {
		t.Errorf("streams after a conflict: %v, want only OTHER", got)
	}
}

func TestSpaceRefusesLossyDrift(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	cfg := jetstream.StreamConfig{Name: "TASK_z", Subjects: []string{"cotal.z.svc.>"}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("create TASK_z: %v", err)
	}
	_, err := provision.Space(ctx, js, "z", provision.Options{})
	if !errors.Is(err, provision.ErrConflict) || !strings.Contains(err.Error(), "retention Limits, want WorkQueue") {
		t.Fatalf("provision over a Limits TASK_z: %v, want a retention conflict", err)
	}
}

func TestSpaceRepairsDrift(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "drift", provision.Options{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	kv, err := js.KeyValue(ctx, "cotal_presence_drift")
	if err != nil {
		t.Fatalf("presence bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "local.alice", []byte("{}")); err != nil {
		t.Fatalf("put presence: %v", err)
	}
	// Someone widened the presence TTL and turned on direct get for DMs.
	if _, err := js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cotal_presence_drift", History: 1, TTL: time.Minute}); err != nil {
		t.Fatalf("drift presence ttl: %v", err)
	}
	dm := streamConfig(t, js, "DM_drift")
	dm.AllowDirect = true
	if _, err := js.UpdateStream(ctx, dm); err != nil {
		t.Fatalf("drift DM direct get: %v", err)
	}
	chat := streamConfig(t, js, "CHAT_drift")
	chat.MaxMsgsPerSubject = 10
	if _, err := js.UpdateStream(ctx, chat); err != nil {
		t.Fatalf("drift CHAT per-subject limit: %v", err)
	}

	rep, err := provision.Space(ctx, js, "drift", provision.Options{})
	if err != nil {
		t.Fatalf("re-provision: %v", err)
	}
	if !slices.Equal(rep.Updated, []string{"CHAT_drift", "DM_drift", "cotal_presence_drift"}) || len(rep.Created) != 0 {
		t.Fatalf("report %+v, want CHAT, DM and presence updated", rep)
	}
	if c := streamConfig(t, js, "KV_cotal_presence_drift"); c.MaxAge != protocol.LivenessWindow || c.Duplicates != protocol.LivenessWindow {
		t.Errorf("presence ttl %s, dedupe %s after repair, want %s", c.MaxAge, c.Duplicates, protocol.LivenessWindow)
	}
	if c := streamConfig(t, js, "DM_drift"); c.AllowDirect {
		t.Error("DM_drift still allows direct get")
	}
	if c := streamConfig(t, js, "KV_cotal_presence_drift"); c.AllowRollup {
		t.Error("presence still allows rollup after the repair (the KV API turned it on)")
	}
	if c := streamConfig(t, js, "CHAT_drift"); c.MaxMsgsPerSubject != 1000 {
		t.Errorf("CHAT per-subject limit %d after repair, want 1000", c.MaxMsgsPerSubject)
	}
	if _, err := kv.Get(ctx, "local.alice"); err != nil {
		t.Errorf("presence entry lost by the repair: %v", err)
	}
	rep, err = provision.Space(ctx, js, "drift", provision.Options{})
	if err != nil || len(rep.Existing) != len(names("drift")) {
		t.Fatalf("third run: %+v, %v, want all existing", rep, err)
	}
}

func TestChannelDefaultsErrors(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.ChannelDefaults(ctx, js, "nowhere"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("defaults of an unprovisioned space: %v, want ErrBucketNotFound", err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cotal_channels_bare"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	d, err := provision.ChannelDefaults(ctx, js, "bare")
	if err != nil || d != (provision.Defaults{}) || d.EffectiveDeliveryClass() != provision.ClassDurable {
		t.Errorf("absent =defaults: %+v, %v, want zero defaults resolving to durable", d, err)
	}
	if _, err := kv.Put(ctx, protocol.ChannelDefaultsKey, []byte(`{"deliveryClass":"sometimes"}`)); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := provision.ChannelDefaults(ctx, js, "bare"); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("invalid class: %v, want an error naming it", err)
	}
}

func TestSpaceHonoursContext(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := provision.Space(ctx, js, "late", provision.Options{})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `provision space "late": stream CHAT_late:`) {
		t.Fatalf("provision with a cancelled context: %v", err)
	}
}

func TestSpaceConcurrent(t *testing.T) {
	js := meshtest.JetStream(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			rep, err := provision.Space(t.Context(), js, "busy", provision.Options{})
			if err == nil && len(rep.Created)+len(rep.Updated)+len(rep.Existing) != len(names("busy")) {
				err = errors.New("report does not account for every name")
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent provision: %v", err)
		}
	}
	if d, err := provision.ChannelDefaults(t.Context(), js, "busy"); err != nil || d.DeliveryClass != provision.ClassDurable {
		t.Fatalf("defaults %+v, err %v", d, err)
	}
}

func TestSpaceLeaseTTL(t *testing.T) {
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, "short", provision.Options{LeaseTTL: 2 * time.Second}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if c := streamConfig(t, js, "KV_cotal_delivery_short"); c.MaxAge != 2*time.Second {
		t.Fatalf("lease TTL %s, want 2s", c.MaxAge)
	}
	if _, err := provision.Space(t.Context(), js, "neg", provision.Options{LeaseTTL: -time.Second}); err == nil || !strings.Contains(err.Error(), "lease TTL -1s") {
		t.Fatalf("a negative lease TTL: %v", err)
	}
	if got := streamNames(t, js); slices.Contains(got, "CHAT_neg") {
		t.Fatalf("a refused provision created streams: %v", got)
	}
}

// publishN stores n messages on subject.
func publishN(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(t.Context(), subject, []byte("m")); err != nil {
			t.Fatalf("publish %d on %s: %v", i, subject, err)
		}
	}
}

// oldDLV creates DLV_<space> as the earlier release made it: 10000 copies per member.
func oldDLV(t *testing.T, js jetstream.JetStream, space string) {
	t.Helper()
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "DLV_" + space, Subjects: []string{"cotal." + space + ".dlv.>"}, Retention: jetstream.LimitsPolicy,
		Storage: jetstream.FileStorage, Replicas: 1, MaxConsumers: -1, MaxMsgs: -1, MaxBytes: -1,
		MaxMsgsPerSubject: 10000, Discard: jetstream.DiscardOld, Duplicates: 2 * time.Hour,
	})
	if err != nil {
		t.Fatalf("create the earlier DLV: %v", err)
	}
}

func TestSpaceLowersDLVLimitWhenNothingIsLost(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	oldDLV(t, js, "low")
	publishN(t, js, "cotal.low.dlv.local.bob.u1", 1000) // exactly the new limit: nothing to drop
	publishN(t, js, "cotal.low.dlv.local.amy.u2", 3)
	rep, err := provision.Space(ctx, js, "low", provision.Options{})
	if err != nil {
		t.Fatalf("provision over the earlier DLV: %v", err)
	}
	if !slices.Contains(rep.Updated, "DLV_low") {
		t.Errorf("report %+v, want DLV_low updated", rep)
	}
	if c := streamConfig(t, js, "DLV_low"); c.MaxMsgsPerSubject != 1000 {
		t.Errorf("DLV per-subject limit %d, want 1000", c.MaxMsgsPerSubject)
	}
	st, err := js.Stream(ctx, "DLV_low")
	if err != nil || st.CachedInfo().State.Msgs != 1003 {
		t.Fatalf("DLV after the repair: %v, want all 1003 copies kept", err)
	}
}

func TestSpaceRefusesLoweringDLVLimitThatDrops(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	oldDLV(t, js, "full")
	publishN(t, js, "cotal.full.dlv.local.bob.u1", 1002)
	_, err := provision.Space(ctx, js, "full", provision.Options{})
	if !errors.Is(err, provision.ErrConflict) {
		t.Fatalf("provision over a DLV holding 1002 copies for one member: %v, want ErrConflict", err)
	}
	for _, part := range []string{"stream DLV_full", "max msgs per subject 10000, want 1000",
		"subject cotal.full.dlv.local.bob.u1 holds 1002 messages", "drop its oldest 2", "nothing was changed"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q lacks %q", err, part)
		}
	}
	if c := streamConfig(t, js, "DLV_full"); c.MaxMsgsPerSubject != 10000 {
		t.Errorf("DLV per-subject limit %d after a refusal, want 10000 unchanged", c.MaxMsgsPerSubject)
	}
	if got := streamNames(t, js); !slices.Equal(got, []string{"DLV_full"}) {
		t.Errorf("streams after a refusal: %v, want only DLV_full", got)
	}
}

func TestSpaceUpgradesEarlierBuckets(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	// The earlier release made the buckets through nats.go's KV API (deletes denied) and
	// the auth bucket without per-message TTLs.
	acl, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cotal_acl_up", History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatalf("create the earlier ACL bucket: %v", err)
	}
	if _, err := acl.Put(ctx, "local.bob.u1", []byte(`{"allowSubscribe":["general"]}`)); err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "KV_cotal_auth_up", Subjects: []string{"$KV.cotal_auth_up.>"}, Storage: jetstream.FileStorage, Replicas: 1,
		MaxConsumers: -1, MaxMsgs: -1, MaxBytes: -1, MaxMsgSize: -1, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew,
		Duplicates: 2 * time.Minute, AllowRollup: true, DenyDelete: true,
	})
	if err != nil {
		t.Fatalf("create the earlier auth bucket: %v", err)
	}
	auth, err := js.KeyValue(ctx, "cotal_auth_up")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Put(ctx, "plane", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}

	rep, err := provision.Space(ctx, js, "up", provision.Options{})
	if err != nil {
		t.Fatalf("provision over the earlier buckets: %v", err)
	}
	if !slices.Contains(rep.Updated, "cotal_auth_up") || !slices.Contains(rep.Existing, "cotal_acl_up") {
		t.Errorf("report %+v, want the auth bucket updated and the ACL bucket existing", rep)
	}
	if c := streamConfig(t, js, "KV_cotal_auth_up"); !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != time.Hour {
		t.Errorf("auth bucket after the upgrade: allow msg ttl %v, marker ttl %s; want true, 1h", c.AllowMsgTTL, c.SubjectDeleteMarkerTTL)
	}
	if c := streamConfig(t, js, "KV_cotal_acl_up"); !c.DenyDelete {
		t.Error("the ACL bucket's deny delete changed (the server cannot lift it; Space must leave it)")
	}
	var note string
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "bucket cotal_acl_up: deny delete true, want false kept:") {
			note = n
		}
	}
	if note == "" {
		t.Errorf("notes %q lack the ACL bucket's deny delete", rep.Notes)
	}
	if e, err := acl.Get(ctx, "local.bob.u1"); err != nil || !strings.Contains(string(e.Value()), "general") {
		t.Errorf("ACL row after the upgrade: %v", err)
	}
	if e, err := auth.Get(ctx, "plane"); err != nil || string(e.Value()) != `{"v":1}` {
		t.Errorf("auth row after the upgrade: %v", err)
	}
	// A row with a per-message TTL is stored now.
	ttl := nats.NewMsg("$KV.cotal_auth_up.cred.x")
	ttl.Header.Set("Nats-TTL", "1h")
	if _, err := js.PublishMsg(ctx, ttl); err != nil {
		t.Errorf("a row with a per-message TTL after the upgrade: %v", err)
	}
	rep, err = provision.Space(ctx, js, "up", provision.Options{})
	if err != nil || slices.Contains(rep.Updated, "cotal_auth_up") {
		t.Fatalf("second run: %+v, %v, want nothing more to update", rep, err)
	}
}

// TestTasksBucketRefusesRollup: the task board bucket is made with rollup off, so an
// agent's put with Nats-Rollup: all cannot purge every other principal's rows.
func TestTasksBucketRefusesRollup(t *testing.T) {
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, "prod", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := streamConfig(t, js, "KV_cotal_tasks_prod")
	if cfg.AllowRollup || !cfg.AllowDirect || cfg.MaxMsgsPerSubject != 1 {
		t.Fatalf("tasks bucket config: rollup %v direct %v history %d", cfg.AllowRollup, cfg.AllowDirect, cfg.MaxMsgsPerSubject)
	}
}

// TestClaimsBucket: the claims bucket keeps one value per key, expires each record by its
// own TTL and none later than claims.MaxTTL, bounds a record's size and refuses rollups;
// a space made before it gains it in place.
func TestClaimsBucket(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "old", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "KV_cotal_claims_old"); err != nil { // as a space of an earlier release
		t.Fatal(err)
	}
	rep, err := provision.Space(ctx, js, "old", provision.Options{})
	if err != nil || !slices.Equal(rep.Created, []string{"cotal_claims_old"}) {
		t.Fatalf("re-provision: %+v, %v; want the claims bucket created in place", rep, err)
	}
	c := streamConfig(t, js, "KV_cotal_claims_old")
	if !c.AllowMsgTTL || c.AllowRollup || c.MaxMsgsPerSubject != 1 || c.MaxAge != 24*time.Hour || c.MaxMsgSize != 4096 || !c.AllowDirect {
		t.Fatalf("claims bucket config %+v", c)
	}
}
