package join

import (
	"context"
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
		{args: []string{"alice"}, name: "alice", channels: []string{"general"}},
		{args: []string{"alice", "--name", "alice"}, name: "alice", channels: []string{"general"}},
		{args: []string{"alice", "--name", "bob"}, wantErr: `the name is given twice, as the argument "alice" and as --name "bob"`},
		{args: []string{"alice", "bob"}, wantErr: "accepts at most 1 arg"},
		{args: []string{"a.b"}, wantErr: "use 1 to 64 letters"},
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

func TestReadLinesRefusesOverlongLineAndGoesOn(t *testing.T) {
	in := strings.Repeat("a", maxLine) + "\n" + strings.Repeat("b", maxLine+1) + "\r\nafter\r\n\nlast"
	lines := make(chan inputLine)
	go readLines(context.Background(), strings.NewReader(in), lines)
	var got []inputLine
	for l := range lines {
		got = append(got, l)
	}
	if len(got) != 5 {
		t.Fatalf("got %d lines, want 5", len(got))
	}
	if got[0].err != nil || len(got[0].text) != maxLine {
		t.Errorf("line 1 (exactly %d bytes): err %v, %d bytes", maxLine, got[0].err, len(got[0].text))
	}
	if got[1].err == nil || !strings.Contains(got[1].err.Error(), "line 2 not posted: it is 1048577 bytes") {
		t.Errorf("line 2 (one byte over): err %v", got[1].err)
	}
	for i, want := range []string{"after", "", "last"} {
		if l := got[i+2]; l.err != nil || l.text != want {
			t.Errorf("line %d: %q, %v; want %q", i+3, l.text, l.err, want)
		}
	}
}
