package trust

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// An admin credential (the dashboard's) reads; it never asks the agent manager to spawn,
// type into a terminal, attach or stop, on either rail, under its own name or another's.
// Only the project's own identity (the provisioner) may use the operator rail.
func TestAdminNeverDrivesTheManager(t *testing.T) {
	sp := oneSpace(t)
	adm := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "adm"}
	a := sp.dial(t, UserSpec{Name: "adm", Profile: ProfileAdmin, Principal: adm, LifecycleUID: uidX})
	obs := sp.dial(t, UserSpec{Name: "obs", Profile: ProfileObserver, Principal: carol})
	for _, op := range protocol.MgrOps {
		for _, svc := range []string{protocol.ServiceManager, protocol.ServiceManagerAgent} {
			a.pubRefused(t, protocol.MgrSubject(sp.name, svc, adm, op))
			obs.pubRefused(t, protocol.MgrSubject(sp.name, svc, carol, op))
		}
	}
	// Nor may it read a manager's answers under its own request subjects.
	a.subRefused(t, protocol.ReplyFilter(protocol.CtlSubject(sp.name, protocol.ServiceManager, adm)+".*"))

	// The provisioner (the operator's own identity) may.
	op := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	p := sp.dial(t, UserSpec{Name: "root", Profile: ProfileProvisioner, Principal: op})
	if err := p.nc.Publish(protocol.MgrSubject(sp.name, protocol.ServiceManager, op, protocol.MgrPs), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	p.noErrors(t)
}

// The manager may list the DM durables' names (to tell a name that was held) and nothing
// more of them.
func TestManagerListsDMDurableNames(t *testing.T) {
	sp := oneSpace(t)
	sp.precreateDM(t, alice, uidA)
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}
	sp.precreateDM(t, me, uidB)
	m := sp.dial(t, UserSpec{Name: "manager", Profile: ProfileManager, Principal: me, LifecycleUID: uidB})
	s, err := m.js.Stream(t.Context(), protocol.StreamDM(sp.name))
	if err == nil {
		t.Fatalf("the manager read DM's stream info %v; want it refused", s.CachedInfo().Config.Name)
	}
	msg, err := m.nc.Request(api(verbConsumerNames, protocol.StreamDM(sp.name)), []byte(`{}`), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.ConsumerDM(alice, uidA); !strings.Contains(string(msg.Data), want) {
		t.Fatalf("consumer names %s lack %s", msg.Data, want)
	}
	m.requestRefused(t, api(verbConsumerInfo, protocol.StreamDM(sp.name), protocol.ConsumerDM(alice, uidA)), func(ctx context.Context) error {
		_, err := m.js.Consumer(ctx, protocol.StreamDM(sp.name), protocol.ConsumerDM(alice, uidA))
		return err
	})
}
