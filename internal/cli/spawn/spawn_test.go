package spawn

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdSpawn(t *testing.T) {
	for _, c := range []struct {
		args    []string
		persona string
		agent   string
		rest    []string
		prompt  bool
		err     string
	}{
		{args: nil},
		{args: []string{"reviewer", "--agent", "codex", "--prompt", "go"}, persona: "reviewer", agent: "codex", prompt: true},
		{args: []string{"--agent", "command", "--name", "bot", "--", "./a", "-x", "--y"}, agent: "command", rest: []string{"./a", "-x", "--y"}},
		{args: []string{"dave", "--", "--verbose"}, persona: "dave", rest: []string{"--verbose"}},
		{args: []string{"--agent", "vim"}, err: `refusing --agent "vim"`},
		{args: []string{"--name", "a.b"}, err: `refusing --name "a.b"`},
		{args: []string{"--name", ""}, err: `refusing --name ""`},
		{args: []string{"--role", "a b"}, err: `refusing --role: invalid role "a b"`},
		{args: []string{"--prompt", ""}, err: "refusing an empty --prompt"},
		{args: []string{"--agent", "command"}, err: "refusing --agent command without a program"},
		{args: []string{"a", "b"}, err: "spawn takes one persona"},
		{args: []string{"a-b"}, err: "persona name"},
	} {
		var got *Options
		ios, _, _, _ := iostreams.Test()
		cmd := NewCmdSpawn(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || got == nil {
			t.Errorf("%q: err %v", c.args, err)
			continue
		}
		if got.Persona != c.persona || got.Agent != c.agent || !reflect.DeepEqual(got.Args, c.rest) || got.HasPrompt != c.prompt {
			t.Errorf("%q: opts %+v", c.args, got)
		}
	}
}

func TestSuggestName(t *testing.T) {
	for in, want := range map[string]string{"bad-name": "bad_name", "": "agent_1", "ok_1": "ok_1", strings.Repeat("x", 70): strings.Repeat("x", 64)} {
		if got := suggestName(in); got != want {
			t.Errorf("suggestName(%q) = %q, want %q", in, got, want)
		}
	}
}
