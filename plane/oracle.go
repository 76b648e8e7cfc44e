package plane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// Oracle answers whether a plane holder's connections are still open. Liveness returns an
// error when it got no usable answer; Acquire treats that like "unknown".
type Oracle interface {
	Liveness(ctx context.Context, args protocol.LivenessArgs) (protocol.LivenessResult, error)
}

// DefaultOracleTimeout bounds one request to the delivery daemon's oracle.
const DefaultOracleTimeout = 15 * time.Second

// DaemonOracle asks the space's delivery daemon, on its privileged rail
// cotal.<space>.ctl.delivery-admin.<owner>.<actor> (op planeConnLiveness). The daemon
// answers only a request whose subject names a principal and whose reply subject is
// <request subject>.reply.<nonce>; the broker lets only From's credential publish there and
// read the replies. It checks no signature on this rail.
type DaemonOracle struct {
	Conn    *nats.Conn         // a connection of the space's account as From; required
	Space   string             // space token; required
	From    protocol.Principal // the principal Conn's credential is pinned to; required
	Timeout time.Duration      // bound of one request; 0 means DefaultOracleTimeout
}

// Liveness asks the daemon about args and returns its answer. The errors name the rail:
// no daemon answers, a timeout, a refusal by the daemon or an answer that does not decode.
func (o *DaemonOracle) Liveness(ctx context.Context, args protocol.LivenessArgs) (protocol.LivenessResult, error) {
	subject := protocol.CtlSubject(o.Space, protocol.ServiceDeliveryAdmin, o.From)
	res, err := o.ask(ctx, subject, args)
	if err != nil {
		return protocol.LivenessResult{}, fmt.Errorf("liveness oracle %s: %w", subject, err)
	}
	return res, nil
}

// ask sends one request on subject and waits for its reply.
func (o *DaemonOracle) ask(ctx context.Context, subject string, args protocol.LivenessArgs) (protocol.LivenessResult, error) {
	var res protocol.LivenessResult
	if o.Conn == nil {
		return res, errors.New("no connection")
	}
	if err := protocol.CheckSpace(o.Space); err != nil {
		return res, err
	}
	if err := o.From.Validate(); err != nil {
		return res, fmt.Errorf("from: %w", err)
	}
	a, err := json.Marshal(protocol.LivenessQuery{Query: args}) // the reference's {query: {ledger, records}}
	if err != nil {
		return res, fmt.Errorf("encode args: %w", err)
	}
	body, err := json.Marshal(protocol.ControlRequest{Op: protocol.OpPlaneConnLiveness, Args: a,
		From: protocol.EndpointRef{ID: o.From.String(), Name: o.From.Actor}})
	if err != nil {
		return res, fmt.Errorf("encode request: %w", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultOracleTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	reply := subject + "." + protocol.ReplyToken + "." + protocol.NewLifecycleUID()
	sub, err := o.Conn.SubscribeSync(reply)
	if err != nil {
		return res, fmt.Errorf("subscribe %s: %w", reply, err)
	}
	defer func() { _ = sub.Unsubscribe() }() // best effort: the subscription is ours alone
	if err := o.Conn.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: body}); err != nil {
		return res, fmt.Errorf("publish: %w", err)
	}
	m, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return res, fmt.Errorf("no delivery daemon answers (is `cotal deliver` running for the space?): %w", err)
	}
	if err != nil {
		return res, fmt.Errorf("wait for the answer: %w", err)
	}
	var rep protocol.ControlReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return res, fmt.Errorf("decode the answer: %w", err)
	}
	if !rep.OK {
		return res, fmt.Errorf("the delivery daemon refused: %s", rep.Error)
	}
	if err := json.Unmarshal(rep.Data, &res); err != nil {
		return res, fmt.Errorf("decode the answer's data: %w", err)
	}
	return res, nil
}
