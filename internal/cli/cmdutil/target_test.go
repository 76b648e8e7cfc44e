package cmdutil

import (
	"testing"

	"github.com/cotal-ai/cotal/workspace"
)

// A --server list naming the project's own broker (a cluster's nodes, in any order) is the
// project's mesh: its keys and its user-auth sign-in apply; a list without it is not.
func TestTargetOnProjectMesh(t *testing.T) {
	own := "nats://127.0.0.1:4222"
	mesh := &workspace.Mesh{Server: own, Mode: workspace.ModeAuth}
	external := &workspace.Mesh{Server: own + ",nats://127.0.0.1:5222", Mode: workspace.ModeAuth}
	for _, c := range []struct {
		server string
		mesh   *workspace.Mesh
		want   bool
	}{
		{server: own, mesh: mesh, want: true},
		{server: "nats://127.0.0.1:5222," + own + ",nats://127.0.0.1:6222", mesh: mesh, want: true},
		{server: own + ",nats://127.0.0.1:5222", mesh: mesh, want: true},
		{server: "nats://127.0.0.1:5222,nats://127.0.0.1:6222", mesh: mesh, want: false},
		{server: "nats://127.0.0.1:42220", mesh: mesh, want: false},
		{server: own, mesh: nil, want: false},
		// a mesh on external servers records their list (cotal up --external a,b,c)
		{server: own + ",nats://127.0.0.1:5222", mesh: external, want: true},
		{server: "nats://127.0.0.1:5222", mesh: external, want: true},
		{server: "nats://127.0.0.1:6222", mesh: external, want: false},
	} {
		tg := Target{Server: c.server, Space: "team", Mesh: c.mesh}
		if got := tg.OnProjectMesh(); got != c.want {
			t.Errorf("OnProjectMesh(%q) = %v, want %v", c.server, got, c.want)
		}
		if got := tg.Auth(); got != c.want {
			t.Errorf("Auth(%q) = %v, want %v", c.server, got, c.want)
		}
	}
}
