package use

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// TestNewCmdUse: the argument and flags give the Options run gets; bad input is a usage
// error before anything runs.
func TestNewCmdUse(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string
	}{
		{args: nil},
		{args: []string{"review"}, want: Options{Space: "review"}},
		{args: []string{"--clear"}, want: Options{Clear: true}},
		{args: []string{"--json"}, want: Options{JSON: true}},
		{args: []string{"review", "--clear"}, wantErr: "--clear takes no space"},
		{args: []string{"a.b"}, wantErr: "<space>"},
		{args: []string{"a", "b"}, wantErr: "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdUse(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Space != tt.want.Space || got.Clear != tt.want.Clear || got.JSON != tt.want.JSON {
				t.Fatalf("opts %+v err %v", got, err)
			}
		})
	}
}
