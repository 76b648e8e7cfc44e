package join

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
)

func TestNewCmdJoin(t *testing.T) {
	tests := []struct {
		args     []string
		name     string
		role     string
		channels []string
		wantErr  string
	}{
		{args: []string{"--name", "alice"}, name: "alice", channels: []string{"general"}},
		{args: []string{"--name", "bob", "--role", "reviewer", "--channel", "a", "--channel", "team.>"}, name: "bob", role: "reviewer", channels: []string{"a", "team.>"}},
		{args: nil, wantErr: "--name is required"},
		{args: []string{"--name", "a.b"}, wantErr: "use 1 to 64 letters"},
		{args: []string{"--name", strings.Repeat("x", 65)}, wantErr: "use 1 to 64 letters"},
		{args: []string{"--name", "a", "--role", "x y"}, wantErr: "--role"},
		{args: []string{"--name", "a", "--channel", "a.>.b"}, wantErr: "may only be the last segment"},
		{args: []string{"--name", "carol", "--creds", "carol.creds"}, name: "carol", channels: []string{"general"}}, // checked against the file when run
		{args: []string{"--name", "a", "--reconnect-for", "0s"}, wantErr: "--reconnect-for 0s: want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdJoin, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.name || got.Role != tt.role || strings.Join(got.Channels, ",") != strings.Join(tt.channels, ",") {
				t.Fatalf("opts %+v", got)
			}
		})
	}
}
