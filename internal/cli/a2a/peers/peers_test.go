package peers

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// The flags of add: a good line gives its options; a bad name, URL or role is refused
// before anything is read or dialled.
func TestNewCmdAdd(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" means accepted
	}{
		{[]string{"support", "https://agents.example.com/support", "--role", "helpdesk", "--token-file", "t"}, ""},
		{[]string{"local_1", "http://127.0.0.1:41241"}, ""},
		{[]string{"bad.name", "https://agents.example.com"}, `name "bad.name"`},
		{[]string{"support", "http://agents.example.com"}, "plain http only on loopback"},
		{[]string{"support", "https://u:p@agents.example.com"}, "credentials in the URL"},
		{[]string{"support", "https://agents.example.com", "--role", "no role"}, "--role"},
		{[]string{"support"}, "accepts 2 arg"},
	} {
		var got *AddOptions
		ios, _, _, _ := iostreams.Test()
		cmd := NewCmdAdd(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *AddOptions) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		switch {
		case c.want == "" && (err != nil || got == nil || got.Name != c.args[0] || got.URL != c.args[1]):
			t.Errorf("%v: %v, opts %+v", c.args, err, got)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || got != nil):
			t.Errorf("%v: %v, want %q and no run", c.args, err, c.want)
		}
	}
}

func TestCheckToken(t *testing.T) {
	for in, ok := range map[string]bool{"abc.def-ghi_123\n": true, "tok\r\n": true, "": false, "\n": false, "two words": false, "tab\there": false, "é": false} {
		if _, err := checkToken([]byte(in)); (err == nil) != ok {
			t.Errorf("checkToken(%q) = %v, want ok %v", in, err, ok)
		}
	}
}
