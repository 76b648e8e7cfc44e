package deliver

import (
	"os"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/workspace"
)

// TestLeaseHeldNext: the next line of a held lease stops this project's supervised daemon
// only on the project's own mesh; on another mesh it waits there, naming that mesh.
func TestLeaseHeldNext(t *testing.T) {
	proj := &workspace.Project{Root: t.TempDir()}
	if err := os.MkdirAll(proj.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	d, _ := workspace.DaemonNamed("delivery")
	if err := workspace.WritePidfile(d.PidFile(proj, "main"), os.Getpid()); err != nil { // alive: this test
		t.Fatal(err)
	}
	own := cmdutil.Target{Project: proj, Mesh: &workspace.Mesh{Server: "nats://127.0.0.1:4222"}, Server: "nats://127.0.0.1:4222", Space: "main"}
	if got, want := leaseHeldNext(own), "cotal down delivery --space main && cotal deliver --space main"; got != want {
		t.Errorf("own mesh: %q, want %q", got, want)
	}
	other := own
	other.Server, other.Creds = "nats://10.0.0.9:4222", "d.creds"
	if got, want := leaseHeldNext(other), "cotal deliver --space main --server nats://10.0.0.9:4222 --creds d.creds --wait"; got != want {
		t.Errorf("another mesh: %q, want %q", got, want)
	}
}
