package channels

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
)

func TestNewCmdSet(t *testing.T) {
	long := func(n int) string { return strings.Repeat("é", n) } // characters, not bytes
	tests := []struct {
		args    []string
		check   func(*Options) bool
		wantErr string
	}{
		{args: []string{"set", "general", "--durable"}, check: func(o *Options) bool {
			return o.Set && o.Name == "general" && o.Class == "durable" && o.Replay == nil && o.Window == nil
		}},
		{args: []string{"set", "general", "--live", "--no-replay", "--window", "7d", "--desc", long(200), "--instructions", long(2000)},
			check: func(o *Options) bool {
				return o.Class == "live" && o.Replay != nil && !*o.Replay && *o.Window == "7d" && *o.Description == long(200)
			}},
		{args: []string{"set", "general", "--window", ""}, check: func(o *Options) bool { return o.Window != nil && *o.Window == "" }},
		{args: []string{"set", "=defaults", "--replay"}, check: func(o *Options) bool { return *o.Replay }},
		{args: []string{"set", "general", "--durable", "--live"}, wantErr: "pick one"},
		{args: []string{"set", "general", "--replay", "--no-replay"}, wantErr: "pick one"},
		{args: []string{"set", "general", "--window", "1w"}, wantErr: `--window "1w"`},
		{args: []string{"set", "general", "--window", "h"}, wantErr: `--window "h"`},
		{args: []string{"set", "general", "--window", "106751d"}, check: func(o *Options) bool { return *o.Window == "106751d" }},
		{args: []string{"set", "general", "--window", "106752d"}, wantErr: `--window "106752d": over the longest window, 106751d`},
		{args: []string{"set", "general", "--window", "2147483649d"}, wantErr: `--window "2147483649d": over the longest window, 106751d`},
		{args: []string{"set", "general", "--window", "2562025h"}, wantErr: "over the longest window"},
		{args: []string{"set", "general", "--window", "0s"}, wantErr: `--window "0s": a window of 0 replays nothing: give --no-replay`},
		{args: []string{"set", "general", "--window", "0"}, wantErr: `--window "0"`},
		{args: []string{"set", "general", "--desc", long(201)}, wantErr: "--desc is 201 characters, over the limit of 200"},
		{args: []string{"set", "general", "--instructions", long(2001)}, wantErr: "--instructions is 2001 characters, over the limit of 2000"},
		{args: []string{"set", "team.*", "--live"}, wantErr: "concrete channel"},
		{args: []string{"set", "general"}, wantErr: "nothing to set"},
		{args: []string{"set", "=defaults", "--desc", "x"}, wantErr: "takes no --desc"},
		{args: []string{"list", "--json"}, check: func(o *Options) bool { return !o.Set && o.JSON }},
		{args: []string{"frob"}, wantErr: `unknown command "frob" for "channels": use `},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdChannels, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got == nil || !tt.check(got) {
				t.Fatalf("opts %+v, err %v", got, err)
			}
		})
	}
}
