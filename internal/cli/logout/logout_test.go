package logout

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// TestNewCmdLogout: the flags give the Options run gets; bad input is a usage error
// before anything runs.
func TestNewCmdLogout(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string
	}{
		{args: nil},
		{args: []string{"--idp", "http://127.0.0.1:5556/api/auth"}, want: Options{IdP: "http://127.0.0.1:5556/api/auth"}},
		{args: []string{"--idp", "https://idp.example.com/api/auth", "--local", "--json"}, want: Options{IdP: "https://idp.example.com/api/auth", Local: true, JSON: true}},
		{args: []string{"--local"}, wantErr: "--local goes with --idp"},
		{args: []string{"--idp", "http://idp.example.com"}, wantErr: "http is only allowed on 127.0.0.1 or localhost"},
		{args: []string{"--idp", ""}, wantErr: "--idp"},
		{args: []string{"extra"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdLogout(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
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
			if err != nil || got.IdP != tt.want.IdP || got.Local != tt.want.Local || got.JSON != tt.want.JSON {
				t.Fatalf("opts %+v err %v", got, err)
			}
		})
	}
}
