package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// body builds an envelope from fromID with one extra routing field, e.g. `"channel":"c"`.
func body(fromID, routing string) string {
	return `{"id":"m1","ts":1,"space":"main","from":{"id":"` + fromID + `","name":"n"},` +
		routing + `,"parts":[{"kind":"text","text":"hi"}]}`
}

var (
	chatAB = protocol.ChatSubject("main", alice, "team.backend")
	instAB = protocol.InstSubject("main", bob, alice) // alice writes to bob
	svcA   = protocol.SvcSubject("main", "reviewer", alice)
	nkeyCh = "cotal.main.chat." + nkey + ".team.backend"
	devP   = protocol.Principal{Owner: "local", Actor: nkey}
)

type receiveCase struct {
	name    string
	subject string
	body    string
	kind    protocol.DeliveryKind // for accepted messages
	reason  protocol.Reason       // "" means accepted
}

var receiveCases = []receiveCase{
	{"chat", chatAB, body(alice.String(), `"channel":"team.backend"`), protocol.DeliveryChannel, ""},
	{"inst", instAB, body(alice.String(), `"to":"`+bob.String()+`"`), protocol.DeliveryDM, ""},
	{"svc", svcA, body(alice.String(), `"toService":"reviewer"`), protocol.DeliveryAnycast, ""},
	{"dev principal", protocol.ChatSubject("main", devP, "general"), body(devP.String(), `"channel":"general"`), protocol.DeliveryChannel, ""},
	{"empty id", chatAB, strings.Replace(body(alice.String(), `"channel":"team.backend"`), `"id":"m1"`, `"id":""`, 1), protocol.DeliveryChannel, ""},
	// The kind comes from the subject, and the payload's one routing field must be the
	// subject's: a channel post the server was made to store on a DM subject (a push
	// consumer's deliver subject, a request's reply subject) is not a DM from its sender.
	{"chat with a dm payload", chatAB, body(alice.String(), `"to":"`+bob.String()+`"`), "", protocol.ReasonRouteMismatch},
	{"inst with a channel payload", instAB, body(alice.String(), `"channel":"team.backend"`), "", protocol.ReasonRouteMismatch},
	{"inst to another", instAB, body(alice.String(), `"to":"`+alice.String()+`"`), "", protocol.ReasonRouteMismatch},
	{"chat on another channel", chatAB, body(alice.String(), `"channel":"team.frontend"`), "", protocol.ReasonRouteMismatch},
	{"svc for another role", svcA, body(alice.String(), `"toService":"builder"`), "", protocol.ReasonRouteMismatch},
	{"two routes", chatAB, body(alice.String(), `"channel":"team.backend","to":"`+bob.String()+`"`), "", protocol.ReasonRouteMismatch},
	{"svc with no routing", svcA, `{"id":"m","from":{"id":"` + alice.String() + `"}}`, "", protocol.ReasonRouteMismatch},

	{"ctl", "cotal.main.ctl.manager." + ownerA + ".alice", body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"chat without channel", "cotal.main.chat." + ownerA + ".alice", body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"live", protocol.LiveSubject("main", protocol.PlaneManager, alice), body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"wildcard", "cotal.main.chat.*.*.team", body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"empty subject", "", body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"wrong root", "nats.main.chat." + ownerA + ".alice.c", body(alice.String(), `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	// SPEC §3.5: parses, but the owner slot holds an nkey, so it is dropped even when from.id agrees.
	{"nkey owner", nkeyCh, body(nkey+".team", `"channel":"backend"`), "", protocol.ReasonMalformedSubject},
	{"nkey owner in inst sender", "cotal.main.inst." + ownerB + ".bob." + nkey + ".x", body(nkey+".x", `"to":"x"`), "", protocol.ReasonMalformedSubject},
	{"nkey owner in svc sender", "cotal.main.svc.reviewer." + nkey + ".x", body(nkey+".x", `"toService":"reviewer"`), "", protocol.ReasonMalformedSubject},
	{"arbitrary owner", "cotal.main.chat.mallory.x.c", body("mallory.x", `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	{"actor with a dash", "cotal.main.chat." + ownerA + ".a-b.c", body(ownerA+".a-b", `"channel":"c"`), "", protocol.ReasonMalformedSubject},
	// The subject is checked before the body.
	{"bad subject and bad body", "cotal.main.ctl.x.y.z", `not json`, "", protocol.ReasonMalformedSubject},
	{"nkey owner and bad body", nkeyCh, `not json`, "", protocol.ReasonMalformedSubject},

	{"not json", chatAB, `not json`, "", protocol.ReasonMalformedJSON},
	{"empty body", chatAB, ``, "", protocol.ReasonMalformedJSON},
	{"invalid utf-8", chatAB, "{\"id\":\"\xff\",\"from\":{\"id\":\"" + alice.String() + "\"}}", "", protocol.ReasonMalformedJSON},
	{"missing id", chatAB, `{"from":{"id":"` + alice.String() + `"}}`, "", protocol.ReasonMalformedJSON},
	{"number id", chatAB, `{"id":7,"from":{"id":"` + alice.String() + `"}}`, "", protocol.ReasonMalformedJSON},
	{"trailing data", chatAB, body(alice.String(), `"channel":"c"`) + `}`, "", protocol.ReasonMalformedJSON},
	{"bad part", chatAB, `{"id":"m","from":{"id":"` + alice.String() + `"},"parts":[{}]}`, "", protocol.ReasonMalformedJSON},

	{"from another peer", chatAB, body(bob.String(), `"channel":"team.backend"`), "", protocol.ReasonSenderMismatch},
	{"dm from the recipient", instAB, body(bob.String(), `"to":"`+bob.String()+`"`), "", protocol.ReasonSenderMismatch},
	{"from.id differs in case", chatAB, body(strings.ToUpper(alice.String()), `"channel":"c"`), "", protocol.ReasonSenderMismatch},
	{"from.id dash-form", chatAB, body(alice.Dash(), `"channel":"c"`), "", protocol.ReasonSenderMismatch},
	{"from.id empty", chatAB, `{"id":"m","from":{}}`, "", protocol.ReasonSenderMismatch},
	{"from missing", chatAB, `{"id":"m","channel":"c"}`, "", protocol.ReasonSenderMismatch},
	{"from null", chatAB, `{"id":"m","from":null}`, "", protocol.ReasonSenderMismatch},
}

func TestReceive(t *testing.T) {
	for _, tt := range receiveCases {
		t.Run(tt.name, func(t *testing.T) {
			r, err := protocol.Receive(tt.subject, []byte(tt.body))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Receive(%q, %s): %v", tt.subject, tt.body, err)
				}
				if r.Kind != tt.kind {
					t.Errorf("Kind = %q, want %q", r.Kind, tt.kind)
				}
				if r.Message.From.ID != r.Subject.Sender.String() {
					t.Errorf("accepted from.id %q from sender %q", r.Message.From.ID, r.Subject.Sender)
				}
				if r.Subject.String() != tt.subject {
					t.Errorf("Subject = %+v, which builds %q", r.Subject, r.Subject.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("Receive(%q, %s) = %+v, want a %s rejection", tt.subject, tt.body, r, tt.reason)
			}
			var rej *protocol.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Receive error %v (%T) is not a *RejectError", err, err)
			}
			if rej.Reason != tt.reason {
				t.Errorf("Reason = %q, want %q (%v)", rej.Reason, tt.reason, err)
			}
			if !strings.HasPrefix(err.Error(), string(tt.reason)+": ") {
				t.Errorf("Error() = %q, want it to start with the reason", err)
			}
			if errors.Unwrap(err) == nil {
				t.Errorf("RejectError %v does not unwrap", err)
			}
			if r.Kind != "" || r.Message.ID != "" || r.Subject != (protocol.Subject{}) {
				t.Errorf("a rejection returned data: %+v", r)
			}
		})
	}
}

func TestReceiveFields(t *testing.T) {
	r, err := protocol.Receive(instAB, []byte(body(alice.String(), `"to":"`+bob.String()+`"`)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Subject.Recipient != bob || r.Subject.Sender != alice || r.Message.To != bob.String() || r.Message.ID != "m1" {
		t.Errorf("Receive = %+v", r)
	}
	r, err = protocol.Receive(svcA, []byte(body(alice.String(), `"toService":"reviewer"`)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Subject.Role != "reviewer" || r.Message.Text() != "hi" {
		t.Errorf("Receive = %+v", r)
	}
	r, err = protocol.Receive(protocol.ChatSubject("main", alice, "team.backend"), []byte(sampleMulticast))
	if err != nil {
		t.Fatalf("the SPEC sample on its own subject: %v", err)
	}
	if r.Subject.Channel != "team.backend" || r.Message.ContextID != "ctx-1" {
		t.Errorf("Receive = %+v", r)
	}
}

func TestReceiveWrapsCauses(t *testing.T) {
	_, err := protocol.Receive("cotal.main.ctl.x.y.z", nil)
	if !errors.Is(err, protocol.ErrMalformedSubject) {
		t.Errorf("a malformed subject: %v does not wrap ErrMalformedSubject", err)
	}
}

func FuzzReceive(f *testing.F) {
	for _, c := range receiveCases {
		f.Add(c.subject, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		r, err := protocol.Receive(subject, data)
		if err != nil {
			var rej *protocol.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Receive error %v (%T) is not a *RejectError", err, err)
			}
			switch rej.Reason {
			case protocol.ReasonMalformedSubject, protocol.ReasonMalformedJSON, protocol.ReasonSenderMismatch, protocol.ReasonRouteMismatch:
			default:
				t.Fatalf("unknown reason %q", rej.Reason)
			}
			return
		}
		if r.Message.From.ID != r.Subject.Sender.String() {
			t.Fatalf("accepted from.id %q from sender %q on %q", r.Message.From.ID, r.Subject.Sender, subject)
		}
		if err := r.Subject.Sender.Validate(); err != nil {
			t.Fatalf("accepted an invalid sender on %q: %v", subject, err)
		}
		if r.Subject.String() != subject {
			t.Fatalf("accepted %q, which parsed to %+v", subject, r.Subject)
		}
		want := map[protocol.Kind]protocol.DeliveryKind{
			protocol.KindChat: protocol.DeliveryChannel,
			protocol.KindInst: protocol.DeliveryDM,
			protocol.KindSvc:  protocol.DeliveryAnycast,
		}[r.Subject.Kind]
		if want == "" || r.Kind != want {
			t.Fatalf("subject kind %q delivered as %q", r.Subject.Kind, r.Kind)
		}
	})
}
