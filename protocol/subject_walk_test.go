package protocol_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// parseSubjectSplit is ParseSubject as it was before it walked the tokens in place: the
// reference the walk must match, result for result and error for error.
func parseSubjectSplit(subject string) (protocol.Subject, error) {
	t := strings.Split(subject, ".")
	if len(t) < 3 || t[0] != protocol.Root {
		return protocol.Subject{}, fmt.Errorf("%w %q: want %s.<space>.<kind> and the tokens of the kind", protocol.ErrMalformedSubject, subject, protocol.Root)
	}
	for i, tok := range t {
		if !protocol.ValidToken(tok) {
			return protocol.Subject{}, fmt.Errorf("%w %q: token %d %q is not a concrete token", protocol.ErrMalformedSubject, subject, i, tok)
		}
	}
	s := protocol.Subject{Space: t[1], Kind: protocol.Kind(t[2])}
	arity := func(ok bool, want string) error {
		if !ok {
			return fmt.Errorf("%w %q: a %s subject is %s", protocol.ErrMalformedSubject, subject, s.Kind, want)
		}
		return nil
	}
	var err error
	switch s.Kind {
	case protocol.KindChat:
		if err = arity(len(t) >= 6, "cotal.<space>.chat.<owner>.<actor>.<channel...>"); err == nil {
			s.Sender = protocol.Principal{t[3], t[4]}
			s.Channel = strings.Join(t[5:], ".")
		}
	case protocol.KindInst:
		if err = arity(len(t) == 7, "cotal.<space>.inst.<rOwner>.<rActor>.<sOwner>.<sActor>"); err == nil {
			s.Recipient = protocol.Principal{t[3], t[4]}
			s.Sender = protocol.Principal{t[5], t[6]}
		}
	case protocol.KindSvc:
		if err = arity(len(t) == 6, "cotal.<space>.svc.<role>.<owner>.<actor>"); err == nil {
			s.Role = t[3]
			s.Sender = protocol.Principal{t[4], t[5]}
		}
	case protocol.KindLive:
		if err = arity(len(t) == 6 && (t[3] == protocol.PlaneManager || t[3] == protocol.PlaneDelivery), "cotal.<space>.live.<manager|delivery>.<owner>.<actor>"); err == nil {
			s.Plane = t[3]
			s.Sender = protocol.Principal{t[4], t[5]}
		}
	default:
		err = fmt.Errorf("%w %q: kind %q is not chat, inst, svc or live", protocol.ErrMalformedSubject, subject, t[2])
	}
	if err != nil {
		return protocol.Subject{}, err
	}
	return s, nil
}

// subjectShapes are subjects of every kind and arity, well and badly formed.
func subjectShapes() []string {
	ins := []string{"", ".", "..", "cotal", "cotal.", "cotal.main", "cotal.main.", "x.main.chat.o.a.c",
		"cotal.main.chat.o.a", "cotal.main.chat.o.a.c", "cotal.main.chat.o.a.c.d.e.f.g.h",
		"cotal.main.chat.o.a.c..d", "cotal.main.chat.o.a.c.*", "cotal.main.chat.o.a.>",
		"cotal.main.inst.o.b.o.a", "cotal.main.inst.o.b.o", "cotal.main.inst.o.b.o.a.x",
		"cotal.main.svc.r.o.a", "cotal.main.svc.r.o", "cotal.main.svc.r.o.a.x",
		"cotal.main.live.manager.o.a", "cotal.main.live.delivery.o.a", "cotal.main.live.other.o.a",
		"cotal.main.live.manager.o.a.x", "cotal.main.ctl.manager.o.a", "cotal.main.chat.o. a.c",
		"cotal.ma in.inst.o.b.o.a", "cotal.main.inst.o.b.o.a.", ".cotal.main.inst.o.b.o.a"}
	for _, c := range subjectCases {
		ins = append(ins, c.in)
	}
	return ins
}

func TestParseSubjectMatchesSplit(t *testing.T) {
	for _, in := range subjectShapes() {
		assertParseSubjectMatchesSplit(t, in)
	}
}

func FuzzParseSubjectMatchesSplit(f *testing.F) {
	for _, in := range subjectShapes() {
		f.Add(in)
	}
	f.Fuzz(assertParseSubjectMatchesSplit)
}

func assertParseSubjectMatchesSplit(t *testing.T, in string) {
	got, gotErr := protocol.ParseSubject(in)
	want, wantErr := parseSubjectSplit(in)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("ParseSubject(%q) = %+v, %v; the split reference gives %+v, %v", in, got, gotErr, want, wantErr)
	}
}

// A well-formed subject parses without allocating: every received message is parsed.
func TestParseSubjectDoesNotAllocate(t *testing.T) {
	for _, in := range []string{
		protocol.InstSubject("main", bob, alice),
		protocol.ChatSubject("main", alice, "team.backend"),
		protocol.SvcSubject("main", "reviewer", alice),
	} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := protocol.ParseSubject(in); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("ParseSubject(%q): %v allocations, want 0", in, n)
		}
	}
}

func BenchmarkParseSubject(b *testing.B) {
	in := protocol.InstSubject("main", bob, alice)
	b.Run("split", func(b *testing.B) {
		for b.Loop() {
			_, _ = parseSubjectSplit(in)
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			_, _ = protocol.ParseSubject(in)
		}
	})
}

// Receiving a direct message or a channel post allocates what the message needs (its
// text and its parts), nothing for the checks: the subject is parsed and the recipient
// compared in place.
func TestReceiveAllocatesOnlyTheMessage(t *testing.T) {
	for _, c := range []struct{ subject, body string }{
		{instAB, body(alice.String(), `"to":"`+bob.String()+`"`)},
		{chatAB, body(alice.String(), `"channel":"team.backend"`)},
	} {
		data := []byte(c.body)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := protocol.Receive(c.subject, data); err != nil {
				t.Fatal(err)
			}
		}); n > 2 {
			t.Errorf("Receive on %s: %v allocations, want at most 2 (the message's string and its parts)", c.subject, n)
		}
	}
}

// BenchmarkReceive is the receive checks of one direct message and one channel post.
func BenchmarkReceive(b *testing.B) {
	for _, c := range []struct{ name, subject, body string }{
		{"dm", instAB, body(alice.String(), `"to":"`+bob.String()+`"`)},
		{"post", chatAB, body(alice.String(), `"channel":"team.backend"`)},
	} {
		data := []byte(c.body)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.Receive(c.subject, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
