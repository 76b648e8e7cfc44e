package claims

import (
	"strings"
	"testing"
)

var normalizeCases = []struct {
	in, root, want string // want "" means refused
}{
	{"internal/x.go", "", "internal/x.go"},
	{"./internal//x/", "", "internal/x"},
	{"internal/../docs", "", "docs"},
	{".", "", "."},
	{"a/./b", "", "a/b"},
	{`win\path\f.go`, "", "win/path/f.go"},
	{"/repo/internal/x.go", "/repo", "internal/x.go"},
	{"/repo", "/repo/", "."},
	{"/repo2/x", "/repo", ""},
	{"/etc/passwd", "", ""},
	{"/etc/passwd", "/repo", ""},
	{"../outside", "", ""},
	{"a/../../b", "", ""},
	{"..", "", ""},
	{"", "", ""},
	{"   ", "", ""},
	{"src/*.go", "", ""},
	{"a\nb", "", ""},
	{"a\x1b[31m", "", ""},
	{"\xff", "", ""},
	{"C:/x", "", "C:/x"}, // a relative name on this system, as data
	{strings.Repeat("a", MaxPathLength+1), "", ""},
}

func TestNormalize(t *testing.T) {
	for _, c := range normalizeCases {
		got, err := Normalize(c.in, c.root)
		if c.want == "" {
			if err == nil {
				t.Errorf("Normalize(%q, %q) = %q, want a refusal", c.in, c.root, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q, %q) = %q, %v; want %q", c.in, c.root, got, err, c.want)
		}
	}
}

func TestOverlapAndConflicts(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a", "a", true}, {"a", "a/b", true}, {"a/b", "a", true}, {".", "x/y", true},
		{"a", "ab", false}, {"a/b", "a/c", false}, {"ab/c", "a", false},
	} {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v", c.a, c.b, got)
		}
	}
	if Conflicts("a", false, "a/b", false) {
		t.Error("two shared claims conflict")
	}
	if !Conflicts("a", false, "a/b", true) || !Conflicts("a", true, "a/b", false) {
		t.Error("an exclusive claim does not conflict with an overlapping shared one")
	}
}

// FuzzNormalize: never panics; what it accepts is relative, clean, inside the repository
// and normalises to itself.
func FuzzNormalize(f *testing.F) {
	for _, c := range normalizeCases {
		f.Add(c.in, c.root)
	}
	f.Fuzz(func(t *testing.T, in, root string) {
		got, err := Normalize(in, root)
		if err != nil {
			return
		}
		if strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") || len(got) > MaxPathLength {
			t.Fatalf("Normalize(%q, %q) = %q: not inside the repository", in, root, got)
		}
		if again, err := Normalize(got, ""); err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q, %v: not a fixed point", got, again, err)
		}
	})
}
