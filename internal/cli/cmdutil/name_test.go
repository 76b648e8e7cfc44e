package cmdutil

import (
	"errors"
	"testing"
)

func TestOneName(t *testing.T) {
	for _, c := range []struct {
		args       []string
		flag, want string
		usage      bool
	}{
		{nil, "", "", false},
		{nil, "coder", "coder", false},
		{[]string{"coder"}, "", "coder", false},
		{[]string{"coder"}, "coder", "coder", false},
		{[]string{"coder"}, "other", "", true},
	} {
		got, err := OneName(c.args, c.flag)
		var fe *FlagError
		if got != c.want || (err != nil) != c.usage || (err != nil && !errors.As(err, &fe)) {
			t.Errorf("OneName(%q, %q) = %q, %v; want %q, usage error %v", c.args, c.flag, got, err, c.want, c.usage)
		}
	}
}
