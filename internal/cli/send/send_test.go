package send

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

func TestNewCmdSend(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string
	}{
		{args: []string{"msg", "team.backend", "hello", "world"}, want: Options{Mode: ModeMsg, To: "team.backend", Text: "hello world"}},
		{args: []string{"dm", "bob", "hi", "--space", "s", "--server", "nats://x:1"}, want: Options{Mode: ModeDM, To: "bob", Text: "hi",
			Mesh: cmdutil.MeshFlags{Space: "s", Server: "nats://x:1"}}},
		{args: []string{"ask", "reviewer", "look", "--reply-to", "m1"}, want: Options{Mode: ModeAsk, To: "reviewer", Text: "look", ReplyTo: "m1"}},
		{args: []string{"msg", "team.*", "x"}, wantErr: "a post needs a concrete channel"},
		{args: []string{"msg", "a/b", "x"}, wantErr: "must be letters"},
		{args: []string{"ask", "re.viewer", "x"}, wantErr: "role \"re.viewer\""},
		{args: []string{"dm", "bob", " "}, wantErr: "text is empty"},
		{args: []string{"dm", "bob"}, wantErr: "requires at least 2 arg"},
		{args: []string{"shout", "x", "y"}, wantErr: `unknown command "shout" for "send": use ask, `},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdSend, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Mode != tt.want.Mode || got.To != tt.want.To || got.Text != tt.want.Text ||
				got.Mesh != tt.want.Mesh || got.ReplyTo != tt.want.ReplyTo {
				t.Fatalf("opts %+v, want %+v", got, tt.want)
			}
		})
	}
}
