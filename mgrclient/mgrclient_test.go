package mgrclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
)

const space = "main"

func dial(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestCall: an answer's data is decoded, a refusal is an *Error with its code, terminal
// frames ahead of the answer are skipped, and nobody serving is ErrNoManager.
func TestCall(t *testing.T) {
	url := brokertest.Start(t).ClientURL()
	srv := dial(t, url)
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	c := &mgrclient.Client{NC: dial(t, url), Space: space, Caller: me, Operator: true}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, nil); !errors.Is(err, mgrclient.ErrNoManager) {
		t.Fatalf("nobody serving: %v", err)
	}

	_, err := srv.Subscribe(protocol.MgrSubject(space, protocol.ServiceManager, me, "*"), func(m *nats.Msg) {
		if !protocol.IsReplyTo(m.Subject, m.Reply) {
			t.Errorf("reply subject %q of %q", m.Reply, m.Subject)
			return
		}
		var r protocol.MgrReply
		switch op := m.Subject[len(m.Subject)-len("stop"):]; {
		case op == "stop":
			r = protocol.MgrReply{Error: `no seat "x"`, Code: protocol.MgrCodeNotFound}
		default:
			frame := &nats.Msg{Subject: m.Reply, Data: []byte("frame"), Header: nats.Header{}}
			frame.Header.Set(protocol.MgrTTYHeader, "out")
			_ = srv.PublishMsg(frame)
			b, _ := json.Marshal(protocol.PsResult{Seats: []protocol.SeatInfo{{Name: "w", Process: protocol.SeatRunning}}})
			r = protocol.MgrReply{OK: true, Data: b}
		}
		b, _ := json.Marshal(r)
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	var ps protocol.PsResult
	if err := c.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil || len(ps.Seats) != 1 || ps.Seats[0].Process != protocol.SeatRunning {
		t.Fatalf("ps: %+v %v", ps, err)
	}
	var re *mgrclient.Error
	if err := c.Call(ctx, protocol.MgrStop, protocol.NameArgs{Name: "x"}, nil); !errors.As(err, &re) || re.Code != protocol.MgrCodeNotFound || re.Broker {
		t.Fatalf("stop: %v", err)
	}
	if got := (&mgrclient.Client{Space: space, Caller: me}).Subject(protocol.MgrSpawn); got != "cotal.main.ctl.manager-agent.local.root.spawn" {
		t.Fatalf("agent rail subject %s", got)
	}
}
