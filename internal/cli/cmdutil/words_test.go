package cmdutil

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Count(0, "message"), "0 messages"},
		{Count(1, "message"), "1 message"},
		{Count(uint64(2), "message"), "2 messages"},
		{Count(1, "persona file"), "1 persona file"},
		{Count(3, "live connection"), "3 live connections"},
		{Count(2, "space", "spaces"), "2 spaces"},
		{Count(1, "copy", "copies"), "1 copy"},
		{Count(2, "copy", "copies"), "2 copies"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
