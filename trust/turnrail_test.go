package trust

import (
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// Every agent reaches its own workflow-run turns on the manager's agent rail
// (turn-pending, turn-yield under its own principal) and nothing else there without the
// spawn capability: yielding another agent's turn, or spawning, stopping, typing or
// attaching, is refused by the broker on the agent's real credential.
func TestAgentReachesOnlyItsOwnTurns(t *testing.T) {
	sp := oneSpace(t)
	sp.precreateDM(t, alice, uidA)
	a := sp.dial(t, UserSpec{Name: "alice", Profile: ProfileAgent, Principal: alice, LifecycleUID: uidA})
	for _, op := range []string{protocol.MgrTurnPending, protocol.MgrTurnYield} {
		if err := a.nc.Publish(protocol.MgrSubject(sp.name, protocol.ServiceManagerAgent, alice, op), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	a.noErrors(t)
	for _, op := range protocol.MgrOps {
		a.pubRefused(t, protocol.MgrSubject(sp.name, protocol.ServiceManagerAgent, bob, op))
		a.pubRefused(t, protocol.MgrSubject(sp.name, protocol.ServiceManager, alice, op))
		if op != protocol.MgrTurnPending && op != protocol.MgrTurnYield {
			a.pubRefused(t, protocol.MgrSubject(sp.name, protocol.ServiceManagerAgent, alice, op))
		}
	}
}
