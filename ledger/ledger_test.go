package ledger_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/provision"
)

// bucket starts a broker, provisions space "prod" and opens its auth bucket.
func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, "prod", provision.Options{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return meshtest.AuthBucket(t, js, "prod")
}

func TestGrantLookupListRevoke(t *testing.T) {
	kv := bucket(t)
	ctx := t.Context()
	if _, err := ledger.Lookup(ctx, kv, "alice"); !errors.Is(err, ledger.ErrNotGranted) {
		t.Fatalf("lookup in an empty ledger: %v, want ErrNotGranted", err)
	}
	if rows, err := ledger.List(ctx, kv); err != nil || len(rows) != 0 {
		t.Fatalf("list of an empty ledger: %v %v", rows, err)
	}
	alice, err := ledger.Grant(ctx, kv, ledger.Row{Actor: "alice", Subjects: []string{"sub-b", "sub-a", "sub-a"},
		AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.backend"}, Scopes: []string{"spawn", "role:default"}, Label: "Alice"})
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if alice.Revision != 1 || !slices.Equal(alice.Subjects, []string{"sub-a", "sub-b"}) || alice.UpdatedAt.IsZero() {
		t.Fatalf("granted row %+v", alice)
	}
	got, err := ledger.Lookup(ctx, kv, "alice")
	if err != nil || got.Revision != 1 || got.Label != "Alice" || !slices.Equal(got.Scopes, []string{"role:default", "spawn"}) {
		t.Fatalf("lookup: %+v %v", got, err)
	}

	// A stale revision is refused: no lost update.
	if _, err := ledger.Grant(ctx, kv, ledger.Row{Actor: "alice", Subjects: []string{"x"}, Scopes: []string{"admin"}}); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("grant from revision 0 over revision 1: %v, want ErrConflict", err)
	}
	got.AllowPublish = nil
	got.Scopes = []string{"admin"}
	got, err = ledger.Grant(ctx, kv, got)
	if err != nil || got.Revision != 2 || len(got.AllowPublish) != 0 {
		t.Fatalf("regrant: %+v %v", got, err)
	}
	if _, err := ledger.Grant(ctx, kv, alice); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("grant from stale revision 1: %v, want ErrConflict", err)
	}
	if _, err := ledger.Grant(ctx, kv, ledger.Row{Actor: "bot", Subjects: []string{"sub-c"}, Role: "worker", AllowSubscribe: []string{"*"}}); err != nil {
		t.Fatalf("grant bot: %v", err)
	}
	rows, err := ledger.List(ctx, kv)
	if err != nil || len(rows) != 2 || rows[0].Actor != "alice" || rows[1].Actor != "bot" {
		t.Fatalf("list: %+v %v", rows, err)
	}

	// Revoking one subject keeps the row; the last subject deletes it.
	left, err := ledger.Revoke(ctx, kv, "alice", "sub-a")
	if err != nil || !slices.Equal(left.Subjects, []string{"sub-b"}) || left.Revision != 3 {
		t.Fatalf("revoke subject: %+v %v", left, err)
	}
	if _, err := ledger.Revoke(ctx, kv, "alice", "sub-a"); !errors.Is(err, ledger.ErrNotGranted) {
		t.Fatalf("revoke a subject again: %v, want ErrNotGranted", err)
	}
	if _, err := ledger.Revoke(ctx, kv, "alice", "sub-b"); err != nil {
		t.Fatalf("revoke the last subject: %v", err)
	}
	if _, err := ledger.Lookup(ctx, kv, "alice"); !errors.Is(err, ledger.ErrNotGranted) {
		t.Fatalf("lookup after the last subject: %v, want ErrNotGranted", err)
	}
	if _, err := ledger.Revoke(ctx, kv, "bot", ""); err != nil {
		t.Fatalf("revoke bot: %v", err)
	}
	if _, err := ledger.Revoke(ctx, kv, "bot", ""); !errors.Is(err, ledger.ErrNotGranted) {
		t.Fatalf("revoke bot again: %v, want ErrNotGranted", err)
	}
	if rows, err := ledger.List(ctx, kv); err != nil || len(rows) != 0 {
		t.Fatalf("list after revokes: %+v %v", rows, err)
	}
	// A revoked actor can be granted afresh.
	if r, err := ledger.Grant(ctx, kv, ledger.Row{Actor: "bot", Subjects: []string{"s"}, Scopes: []string{"spawn"}}); err != nil || r.Revision != 1 {
		t.Fatalf("grant after revoke: %+v %v", r, err)
	}
}

func TestGrantRefusesInvalidRows(t *testing.T) {
	kv := bucket(t)
	ok := ledger.Row{Actor: "alice", Subjects: []string{"sub"}, Scopes: []string{"spawn"}}
	for _, tc := range []struct {
		name string
		mut  func(*ledger.Row)
	}{
		{"bad actor", func(r *ledger.Row) { r.Actor = "a.b" }},
		{"long actor", func(r *ledger.Row) { r.Actor = string(make([]byte, 65)) }},
		{"no subject", func(r *ledger.Row) { r.Subjects = nil }},
		{"empty subject", func(r *ledger.Row) { r.Subjects = []string{""} }},
		{"control in subject", func(r *ledger.Row) { r.Subjects = []string{"a\nb"} }},
		{"bad role", func(r *ledger.Row) { r.Role = "a b" }},
		{"bad subscribe", func(r *ledger.Row) { r.AllowSubscribe = []string{"a..b"} }},
		{"bad publish", func(r *ledger.Row) { r.AllowPublish = []string{"a/b"} }},
		{"mid >", func(r *ledger.Row) { r.AllowPublish = []string{">.a"} }},
		{"unknown scope", func(r *ledger.Row) { r.Scopes = []string{"root"} }},
		{"empty role scope", func(r *ledger.Row) { r.Scopes = []string{"role:"} }},
		{"grants nothing", func(r *ledger.Row) { r.Scopes = nil }},
		{"label with newline", func(r *ledger.Row) { r.Label = "a\nb" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			r.Subjects = slices.Clone(ok.Subjects)
			tc.mut(&r)
			if _, err := ledger.Grant(t.Context(), kv, r); !errors.Is(err, ledger.ErrInvalidRow) {
				t.Fatalf("grant %+v: %v, want ErrInvalidRow", r, err)
			}
		})
	}
	if rows, err := ledger.List(t.Context(), kv); err != nil || len(rows) != 0 {
		t.Fatalf("refused grants wrote rows: %+v %v", rows, err)
	}
	if _, err := ledger.Grant(t.Context(), kv, ok); err != nil {
		t.Fatalf("control row: %v", err)
	}
}

func TestBrokenRowFailsClosed(t *testing.T) {
	kv := bucket(t)
	ctx := t.Context()
	if _, err := kv.Put(ctx, ledger.Key("mallory"), []byte(`{"actor":"mallory","subjects":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Lookup(ctx, kv, "mallory"); !errors.Is(err, ledger.ErrInvalidRow) {
		t.Fatalf("lookup of a broken row: %v, want ErrInvalidRow", err)
	}
	if _, err := ledger.List(ctx, kv); !errors.Is(err, ledger.ErrInvalidRow) {
		t.Fatalf("list with a broken row: %v, want ErrInvalidRow", err)
	}
	if r, err := ledger.Grant(ctx, kv, ledger.Row{Actor: "mallory", Subjects: []string{"s"}, Scopes: []string{"spawn"}}); err != nil || r.Revision != 1 {
		t.Fatalf("grant over a broken row: %+v %v", r, err)
	}
	if _, err := kv.Put(ctx, ledger.Key("mallory"), []byte(`not json`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Revoke(ctx, kv, "mallory", ""); err != nil {
		t.Fatalf("revoke a broken row: %v", err)
	}
	if _, err := ledger.Lookup(ctx, kv, "mallory"); !errors.Is(err, ledger.ErrNotGranted) {
		t.Fatalf("lookup after revoke: %v, want ErrNotGranted", err)
	}
}
