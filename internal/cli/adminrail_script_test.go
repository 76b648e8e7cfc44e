package cli_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdEvictAgent connects as agent ACTOR of SPACE (a credential minted from the project's
// keys), asks the space's delivery daemon on its admin rail, as the provisioner the way a
// reference auth service or manager does, to evict local.ACTOR, and prints the answer's
// data and whether the agent's connection was closed by the broker.
//
//	evictagent SPACE ACTOR
func cmdEvictAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: evictagent SPACE ACTOR")
	}
	space, actor := args[0], args[1]
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(space)
	ts.Check(err)
	connect := func(spec trust.UserSpec, opts ...nats.Option) *nats.Conn {
		spec.ExpiresIn = time.Hour
		raw, err := acct.Mint(spec)
		ts.Check(err)
		c, err := trust.ReadCreds(raw)
		ts.Check(err)
		nc, err := nats.Connect(server, append(append(c.Options(), client.TLSOptions("")...), opts...)...)
		ts.Check(err)
		return nc
	}
	victim := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	closed := make(chan struct{})
	agent := connect(trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: victim, LifecycleUID: protocol.NewLifecycleUID()},
		nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	defer agent.Close()
	op := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "script"}
	prov := connect(trust.UserSpec{Name: "script", Profile: trust.ProfileProvisioner, Principal: op})
	defer prov.Close()
	args2, err := json.Marshal(protocol.PrincipalArgs{Principal: victim.String()})
	ts.Check(err)
	body, err := json.Marshal(protocol.ControlRequest{Op: protocol.OpEvictPrincipal, Args: args2, From: protocol.EndpointRef{ID: op.String()}})
	ts.Check(err)
	// The rail answers only on <request>.reply.<nonce>, as the reference's callers ask.
	subject := protocol.CtlSubject(space, protocol.ServiceDeliveryAdmin, op)
	reply := subject + "." + protocol.ReplyToken + ".n" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sub, err := prov.SubscribeSync(reply)
	ts.Check(err)
	ts.Check(prov.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: body}))
	msg, err := sub.NextMsg(30 * time.Second)
	ts.Check(err)
	var rep protocol.ControlReply
	ts.Check(json.Unmarshal(msg.Data, &rep))
	if !rep.OK {
		ts.Fatalf("evictPrincipal %s refused: %s", victim, rep.Error)
	}
	fmt.Fprintf(ts.Stdout(), "%s\n", rep.Data)
	select {
	case <-closed:
		fmt.Fprintf(ts.Stdout(), "%s disconnected by the broker\n", victim)
	case <-time.After(30 * time.Second): // a hang guard: the answer says it was kicked already
		ts.Fatalf("%s still connected after its eviction", victim)
	}
}
