package runstore_test

import (
	"testing"

	"github.com/cotal-ai/cotal/runstore"
)

// BenchmarkJournalAppend is one fenced step append (pending or settled entry); compare it
// with BenchmarkRawPublish, an unfenced publish of the same bytes to the same stream,
// measured in the same run.
func BenchmarkJournalAppend(b *testing.B) {
	js := provisioned(b)
	run := runstore.NewRunID()
	_, ap, err := runstore.Activate(b.Context(), js, space, run, runstore.Lease{Holder: "bench", FencingToken: 1, Epoch: 1}, true, clock())
	if err != nil {
		b.Fatal(err)
	}
	e := entry(run, 0, "sleep", "pending")
	b.ResetTimer()
	for range b.N {
		if _, err := ap.Append(b.Context(), e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawPublish is the baseline of BenchmarkJournalAppend.
func BenchmarkRawPublish(b *testing.B) {
	js := provisioned(b)
	subject := runstore.JournalSubject(space, runstore.NewRunID())
	data := []byte(`{"v":1,"kind":"step","run":"r","n":1,"at":1,"entry":{"v":1,"seq":0,"run":"r","scope":"","kind":"sleep","name":"","occurrence":0,"inputHash":"sha256:00","attempt":0,"state":"pending","startedAt":1}}`)
	b.ResetTimer()
	for range b.N {
		if _, err := js.Publish(b.Context(), subject, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay10k replays a run of 10 000 step records (5 000 steps, pending and
// settled) from the top, as a resume does.
func BenchmarkReplay10k(b *testing.B) {
	js := provisioned(b)
	run := runstore.NewRunID()
	_, ap, err := runstore.Activate(b.Context(), js, space, run, runstore.Lease{Holder: "bench", FencingToken: 1, Epoch: 1}, true, clock())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		st := "pending"
		if i%2 == 1 {
			st = "settled"
		}
		if _, err := ap.Append(b.Context(), entry(run, int64(i/2), "sleep", st)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		recs, _, err := runstore.Replay(b.Context(), js, space, run)
		if err != nil || len(recs) != 10_001 {
			b.Fatalf("replay: %d records, %v", len(recs), err)
		}
	}
}
