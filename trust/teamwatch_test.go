package trust

import (
	"testing"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// The views (cotal console's observer, cotal web's admin) see task board and file claim
// writes live by a plain subscription, as they see presence; an agent is not granted the
// subscription (it reads both buckets by Direct Get), and no reader may write a row.
func TestReadersWatchTheBoardLive(t *testing.T) {
	sp := oneSpace(t)
	general := []string{"general"}
	a := sp.dial(t, agentSpec(alice, uidA, general, general))
	obs := sp.dial(t, UserSpec{Name: "console", Profile: ProfileObserver, Principal: carol, LifecycleUID: uidC})
	adm := sp.dial(t, UserSpec{Name: "web", Profile: ProfileAdmin, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "web"}, LifecycleUID: uidX})
	for _, bucket := range []string{taskboard.Bucket(sp.name), claims.Bucket(sp.name)} {
		kv, err := sp.prov.js.KeyValue(t.Context(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		key := bob.String() + ".x"
		for _, c := range []*conn{obs, adm} {
			live, err := c.nc.SubscribeSync(kvPrefix + bucket + ".>")
			if err != nil {
				t.Fatal(err)
			}
			c.noErrors(t)
			if _, err := kv.Put(t.Context(), key, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			if m := next(t, live); m.Subject != kvKey(bucket, key) {
				t.Fatalf("live %s gave %s", bucket, m.Subject)
			}
			_ = live.Unsubscribe() // seen
		}
	}
	for _, bucket := range []string{taskboard.Bucket(sp.name), claims.Bucket(sp.name)} {
		a.subRefused(t, kvPrefix+bucket+".>")
		for _, c := range []*conn{obs, adm} {
			c.pubRefused(t, kvKey(bucket, bob.String()+".x"))
		}
	}
}
