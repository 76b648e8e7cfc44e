package claims

import (
	"context"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdClaims(t *testing.T) {
	for _, c := range []struct {
		args    []string
		path    string
		json    bool
		wantErr bool
	}{
		{args: nil},
		{args: []string{"--path", "internal/cli", "--json"}, path: "internal/cli", json: true},
		{args: []string{"extra"}, wantErr: true},
		{args: []string{"--holder", "x"}, wantErr: true},
	} {
		var got *Options
		ios, _, _, _ := iostreams.Test()
		cmd := NewCmdClaims(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.wantErr {
			if err == nil {
				t.Errorf("%v: accepted", c.args)
			}
			continue
		}
		if err != nil || got == nil || got.Path != c.path || got.JSON != c.json {
			t.Errorf("%v: opts %+v, err %v", c.args, got, err)
		}
	}
}
