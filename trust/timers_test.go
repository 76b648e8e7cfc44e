package trust

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The timer plane is written only by those it is for: the run host requests its own
// endpoint's timers, the delivery daemon's timer writer arms them, and the broker fires
// them. An agent (even one that may spawn), an observer or an admin can neither request a
// timer, nor arm one with its own scheduling headers, nor forge a fire; the run host arms
// and fires nothing and requests no other endpoint's timers; the daemon requests and
// fires nothing. Every refused publish leaves both streams empty.
func TestTimerPlaneWriters(t *testing.T) {
	sp := oneSpace(t)
	sched := protocol.TimerSubject(sp.name, protocol.RunHostEndpoint, "host1", "1", "tok", protocol.TimerSchedule)
	armed := protocol.TimerSubject(sp.name, protocol.RunHostEndpoint, "host1", "1", "tok", protocol.TimerArmed)
	fire := protocol.TimerSubject(sp.name, protocol.RunHostEndpoint, "host1", "1", "tok", protocol.TimerFire)
	other := protocol.TimerSubject(sp.name, "billing", "host1", "1", "tok", protocol.TimerSchedule)

	spawner := agentSpec(alice, uidA, []string{"general"}, []string{"general"})
	spawner.Capabilities = []string{CapabilitySpawn}
	for _, spec := range []UserSpec{
		spawner,
		{Name: "obs", Profile: ProfileObserver, Principal: carol},
		{Name: "adm", Profile: ProfileAdmin, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "adm"}, LifecycleUID: uidX},
	} {
		c := sp.dial(t, spec)
		c.pubRefused(t, sched)
		c.pubRefused(t, other)
		// An armed schedule with the attacker's own target: the broker would fire it.
		m := &nats.Msg{Subject: armed, Data: []byte(`{"v":1,"timerId":"tok","generation":9,"deadline":0}`), Header: nats.Header{}}
		m.Header.Set(jetstream.ScheduleHeader, "@at 2000-01-01T00:00:00Z")
		m.Header.Set(jetstream.ScheduleTargetHeader, fire)
		if err := c.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		c.waitViolation(t, "Publish", armed)
		c.pubRefused(t, fire)
	}

	mgr := sp.dial(t, UserSpec{Name: "manager", Profile: ProfileManager, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}, LifecycleUID: uidB})
	mgr.pubRefused(t, armed)
	mgr.pubRefused(t, fire)
	mgr.pubRefused(t, other)
	dlv := sp.dial(t, UserSpec{Name: "cotal deliver", Profile: ProfileDelivery, Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_delivery"}})
	dlv.pubRefused(t, sched)
	dlv.pubRefused(t, fire)
	for _, s := range []string{provision.StreamEPTReq(sp.name), provision.StreamEPT(sp.name)} {
		if n := streamMsgs(t, sp.prov.js, s); n != 0 {
			t.Fatalf("%s holds %d messages after the refused publishes; want 0", s, n)
		}
	}

	// What each may do: the run host requests its endpoint's timer, the daemon arms it.
	if _, err := mgr.js.Publish(t.Context(), sched, []byte(`{"v":1,"timerId":"tok","generation":1,"deadline":0}`)); err != nil {
		t.Fatalf("run host's schedule request: %v", err)
	}
	if _, err := dlv.js.Publish(t.Context(), armed, []byte(`{"v":1,"timerId":"tok","generation":1,"deadline":0}`)); err != nil {
		t.Fatalf("timer writer's armed schedule: %v", err)
	}
}
