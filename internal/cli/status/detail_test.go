package status

import "testing"

// TestDetailNamesHeldTasks: the text roster line shows what a peer runs, claims and holds,
// each on the one line even when a value carries a line break.
func TestDetailNamesHeldTasks(t *testing.T) {
	e := RosterEntry{Harness: "codex", Model: "m1", Claims: []ClaimEntry{{Path: "internal/x"}}, Tasks: []string{"a1", "b2\nx"}}
	got := detail(e)
	want := `  [runs codex m1; claims internal/x; tasks a1, b2\nx]`
	if got != want {
		t.Fatalf("detail = %q, want %q", got, want)
	}
	if detail(RosterEntry{Harness: "person"}) != "" {
		t.Fatal("a person with nothing published: want no detail")
	}
}
