package runstore

import (
	"errors"
	"testing"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
)

// The driver waiting on a checkpoint reads the answer record as soon as it is filed and
// may settle the plane's status itself before the answering command presents it. The
// answer took all the same: present reports success when the status names this answer,
// and ErrSettled only when it names another.
func TestPresentLosesTheRaceToTheDriverThatTookThisAnswer(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	const space, token = "race", "tokRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRR"
	if _, err := provision.Space(ctx, js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	recs, err := OpenRecords(ctx, js, space)
	if err != nil {
		t.Fatal(err)
	}
	holder := CheckpointHolder{ID: "cli_run_0123abcd", LifecycleUID: "cli_run_0123abcd"}
	if err := recs.Create(ctx, CheckpointSpecKey(DefaultEndpoint, token), CheckpointSpec{V: 1, Token: token, Holder: holder, MintedAt: 1, InitialDeadline: 1_000_000}); err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(ctx, CheckpointStatusKey(DefaultEndpoint, token), CheckpointStatus{State: CheckpointWaiting, DeadlineGeneration: 1, Deadline: 1_000_000}); err != nil {
		t.Fatal(err)
	}
	p, err := readPlane(ctx, recs, DefaultEndpoint, token)
	if err != nil || p == nil {
		t.Fatalf("plane %v, err %v", p, err)
	}
	// The driver settles first, with the answer it read.
	ts := int64(500)
	driver := CheckpointStatus{State: CheckpointResumed, DeadlineGeneration: 1, Deadline: 1_000_000, SettledGeneration: 1, SettledHolder: &holder, SettledTs: &ts, SettledAnswerID: "ans-mine"}
	if _, err := recs.Update(ctx, CheckpointStatusKey(DefaultEndpoint, token), driver, p.rev); err != nil {
		t.Fatal(err)
	}
	s := &Space{JS: js, Name: space}
	if err := s.present(ctx, recs, p, "ans-mine", 600); err != nil {
		t.Fatalf("the driver settled with this very answer, yet present said: %v", err)
	}
	if err := s.present(ctx, recs, p, "ans-other", 600); !errors.Is(err, ErrSettled) {
		t.Fatalf("the driver settled with another answer: present said %v, want ErrSettled", err)
	}
}

// After a takeover the run's driver holds the run under a new holder id, while the
// checkpoint's spec names the holder that minted it. The answering command wins the
// status CAS, and the driver, which read the answer record as soon as it was filed,
// publishes the settle fact before the command does: the command's fact then differs in
// its holder, yet records the same settlement (token, outcome, answer), so the answer
// took and present reports success. A fact with another answer is ErrSettled.
func TestPresentAfterTheDriverPublishedTheSameSettlement(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	const space = "race2"
	if _, err := provision.Space(ctx, js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	recs, err := OpenRecords(ctx, js, space)
	if err != nil {
		t.Fatal(err)
	}
	minter := CheckpointHolder{ID: "mgr-1.0123456789abcdef", LifecycleUID: "mgr-1.0123456789abcdef"}
	taker := &CheckpointHolder{ID: "mgr-2.fedcba9876543210", LifecycleUID: "mgr-2.fedcba9876543210"}
	plane := func(token string) *planeCheckpoint {
		t.Helper()
		if err := recs.Create(ctx, CheckpointSpecKey(DefaultEndpoint, token), CheckpointSpec{V: 1, Token: token, Holder: minter, MintedAt: 1, InitialDeadline: 1_000_000}); err != nil {
			t.Fatal(err)
		}
		if err := recs.Create(ctx, CheckpointStatusKey(DefaultEndpoint, token), CheckpointStatus{State: CheckpointWaiting, DeadlineGeneration: 1, Deadline: 1_000_000}); err != nil {
			t.Fatal(err)
		}
		p, err := readPlane(ctx, recs, DefaultEndpoint, token)
		if err != nil || p == nil {
			t.Fatalf("plane %v, err %v", p, err)
		}
		return p
	}
	s := &Space{JS: js, Name: space}
	for _, c := range []struct {
		token, driverAnswer string
		want                error
	}{
		{"tokSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS", "ans-mine", nil},
		{"tokOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO", "ans-other", ErrSettled},
	} {
		p := plane(c.token)
		fact := SettleFact{V: 1, Token: c.token, Settle: CheckpointResumed, Generation: 1, Holder: taker, AnswerID: c.driverAnswer, Ts: 600}
		if err := PublishSettleFact(ctx, js, space, DefaultEndpoint, fact); err != nil {
			t.Fatal(err)
		}
		err := s.present(ctx, recs, p, "ans-mine", 600)
		if (c.want == nil && err != nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Fatalf("the driver's fact names answer %s: present said %v, want %v", c.driverAnswer, err, c.want)
		}
	}
}
