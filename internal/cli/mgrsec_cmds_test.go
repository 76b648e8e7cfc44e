package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
)

// cmdMgrReq asks the agent manager with raw nats.go, as any holder of a credential could,
// bypassing cotal's client and its checks:
//
//	mgrreq CREDS MESHJSON RAIL OWNER.ACTOR OP JSON
//
// CREDS is a creds file, or - for none (an open mesh). MESHJSON is a mesh.json naming
// the broker and the space (its first). RAIL is manager (the operator rail) or
// manager-agent. In OWNER.ACTOR and JSON, @operator stands for the actor of the operator
// at the keyboard and @work for the script's work folder. It prints "answer: <the
// manager's answer>" or, when the broker refused the request, "refused: <error>". With !,
// the request must be refused: by the broker, or by the manager (ok false).
func cmdMgrReq(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 6 {
		ts.Fatalf("usage: mgrreq CREDS|- MESHJSON manager|manager-agent OWNER.ACTOR OP JSON")
	}
	_, op := cmdutil.OperatorIdentity()
	sub := func(s string) string {
		return strings.NewReplacer("@operator", op, "@work", ts.Getenv("WORK")).Replace(s)
	}
	var mesh struct {
		Server string   `json:"server"`
		Spaces []string `json:"spaces"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[1])), &mesh); err != nil || len(mesh.Spaces) == 0 {
		ts.Fatalf("read %s: %v (or no space)", args[1], err)
	}
	opts := []nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	if args[0] != "-" {
		opts = append(opts, nats.UserCredentials(ts.MkAbs(args[0])))
	}
	nc, err := nats.Connect(mesh.Server, opts...)
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	caller, err := protocol.ParsePrincipal(sub(args[3]))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	subj := protocol.MgrSubject(mesh.Spaces[0], args[2], caller, args[4])
	reply := subj + "." + protocol.ReplyToken + "." + nats.NewInbox()[len("_INBOX."):]
	s, err := nc.SubscribeSync(reply)
	if err != nil {
		ts.Fatalf("subscribe: %v", err)
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: subj, Reply: reply, Data: []byte(sub(args[5]))}); err != nil {
		ts.Fatalf("publish: %v", err)
	}
	if err := nc.Flush(); err != nil {
		ts.Fatalf("flush: %v", err)
	}
	if err := nc.LastError(); err != nil {
		fmt.Fprintf(ts.Stdout(), "refused: %v\n", err)
		if !neg {
			ts.Fatalf("the broker refused %s: %v", subj, err)
		}
		return
	}
	m, err := s.NextMsg(60 * time.Second)
	if err != nil {
		ts.Fatalf("no answer on %s: %v", reply, err)
	}
	fmt.Fprintf(ts.Stdout(), "answer: %s\n", m.Data)
	var r protocol.MgrReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		ts.Fatalf("answer %s: %v", m.Data, err)
	}
	if neg == r.OK {
		ts.Fatalf("manager answered ok=%v, want ok=%v", r.OK, !neg)
	}
}
