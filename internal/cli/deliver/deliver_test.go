package deliver

import (
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
)

func TestNewCmdDeliver(t *testing.T) {
	tests := []struct {
		args    []string
		check   func(*Options) bool
		wantErr string
	}{
		{args: []string{"--space", "prod"}, check: func(o *Options) bool {
			return o.Mesh.Space == "prod" && o.Shards == 1 && !o.Wait && o.BrokerGone == 15*time.Second
		}},
		{args: []string{"--space", "prod", "--server", "nats://127.0.0.1:4222", "--creds", "d.creds", "--wait", "--broker-gone", "2s", "--pidfile", "d.pid"},
			check: func(o *Options) bool {
				return o.Mesh.Server == "nats://127.0.0.1:4222" && o.Mesh.Creds == "d.creds" && o.Wait && o.BrokerGone == 2*time.Second && o.Pidfile == "d.pid"
			}},
		{args: []string{"--space", "prod", "--shards", "2"}, wantErr: "refusing --shards 2: the delivery daemon runs as one instance per space"},
		{args: []string{"--space", "a.b"}, wantErr: "invalid space name"},
		{args: []string{"--broker-gone", "-1s"}, wantErr: "--broker-gone -1s"},
		{args: []string{"extra"}, wantErr: "unknown command"},
		{args: []string{"--spaces", "spaces.json", "--server", "nats://127.0.0.1:4222"}, check: func(o *Options) bool {
			return o.Spaces == "spaces.json" && o.Mesh.Space == ""
		}},
		{args: []string{"--spaces", "spaces.json", "--space", "prod"}, wantErr: "--space does not go with --spaces"},
		{args: []string{"--spaces", "spaces.json", "--wait"}, wantErr: "--wait does not go with --spaces"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdDeliver, tt.args)
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

func TestNewCmdPending(t *testing.T) {
	got, err := cmdtest.Capture(NewCmdPending, []string{"bob", "--json", "--limit", "5"})
	if err != nil || got.Name != "bob" || !got.JSON || got.Limit != 5 {
		t.Fatalf("opts %+v, err %v", got, err)
	}
	if _, err := cmdtest.Capture(NewCmdPending, []string{"bob", "--limit", "-1"}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
	if _, err := cmdtest.Capture(NewCmdPending, nil); err == nil {
		t.Fatal("no name was accepted")
	}
	// Refused before anything connects (runF is never reached).
	for _, bad := range []string{"b\x1b[31m", "two\nlines", strings.Repeat("n", 1000)} {
		if _, err := cmdtest.Capture(NewCmdPending, []string{bad}); err == nil || !strings.Contains(err.Error(), "recipient name") {
			t.Errorf("recipient %q: %v; want a refusal of the name", bad, err)
		}
	}
	if got, err := cmdtest.Capture(NewCmdPending, []string{"--name", "bob"}); err != nil || got.Name != "bob" {
		t.Fatalf("--name bob: opts %+v, err %v", got, err)
	}
	if _, err := cmdtest.Capture(NewCmdPending, []string{"bob", "--name", "carol"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("two names: %v", err)
	}
}
