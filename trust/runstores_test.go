package trust

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// No agent, observer or admin credential writes a workflow run's journal, records or
// admissions, nor reads the journal through a consumer of its own: the driver (the
// operator's own identity, the provisioner) does, and the broker refuses the rest.
func TestOnlyTheOperatorWritesRunStores(t *testing.T) {
	sp := oneSpace(t)
	wfj := protocol.Root + "." + sp.name + ".wfj.run-0123456789abcdef0123456789abcdef"
	rec, adm := provision.BucketRecords(sp.name), provision.BucketAdmission(sp.name)
	keys := []string{
		wfj,
		kvKey(rec, "run.manager.run-x.spec"), kvKey(rec, "run.manager.run-x.status"),
		kvKey(rec, "program.manager.run-x"), kvKey(rec, "answer.manager.tok.ans"),
		kvKey(rec, "cp.manager.tok.spec"), kvKey(rec, "notice.manager.run-x.a.n.spec"),
		kvKey(adm, "admission.v1.manager.run-x"), kvKey(adm, "revoked.v1.manager.run-x"),
	}
	adminP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "adm"}
	spawner := agentSpec(alice, uidA, []string{"general"}, []string{"general"})
	spawner.Capabilities = []string{CapabilitySpawn}
	for _, spec := range []UserSpec{
		spawner,
		{Name: "obs", Profile: ProfileObserver, Principal: carol},
		{Name: "adm", Profile: ProfileAdmin, Principal: adminP, LifecycleUID: uidX},
	} {
		c := sp.dial(t, spec)
		for _, k := range keys {
			c.pubRefused(t, k)
		}
		stream := provision.StreamWFJ(sp.name)
		c.requestRefused(t, api(verbConsumerCreate, stream, "wfj_run-x_spy", wfj), func(ctx context.Context) error {
			_, err := c.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Name: "wfj_run-x_spy", FilterSubject: wfj})
			return err
		})
		c.requestRefused(t, api(verbStreamInfo, kvStream(rec)), func(ctx context.Context) error {
			s, err := c.js.Stream(ctx, kvStream(rec))
			if err != nil {
				return err
			}
			_, err = s.GetLastMsgForSubject(ctx, kvKey(rec, "run.manager.run-x.spec"))
			return err
		})
	}
	if n := streamMsgs(t, sp.prov.js, provision.StreamWFJ(sp.name)); n != 0 {
		t.Fatalf("WFJ holds %d messages after the refused appends; want 0", n)
	}
	// The operator's own identity appends.
	op := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	p := sp.dial(t, UserSpec{Name: "root", Profile: ProfileProvisioner, Principal: op})
	if _, err := p.js.Publish(t.Context(), wfj, []byte(`{}`)); err != nil {
		t.Fatalf("provisioner append: %v", err)
	}
}
