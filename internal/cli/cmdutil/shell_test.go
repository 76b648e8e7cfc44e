package cmdutil

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"general": "general", "team.>": "'team.>'", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "x.*": "'x.*'", "a=b,c+d@e:f/g_h-i": "a=b,c+d@e:f/g_h-i"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
