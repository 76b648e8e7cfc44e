package cmdutil

import (
	"runtime/debug"
	"testing"
)

func TestSelfCommand(t *testing.T) {
	const mod = "github.com/cotal-ai/cotal/cmd/cotal"
	local := &debug.BuildInfo{Path: mod, Main: debug.Module{Path: "github.com/cotal-ai/cotal", Version: "(devel)"}}
	released := &debug.BuildInfo{Path: mod, Main: debug.Module{Path: "github.com/cotal-ai/cotal", Version: "v1.4.0", Sum: "h1:abc="}}
	stamped := &debug.BuildInfo{Path: mod, Main: debug.Module{Path: "github.com/cotal-ai/cotal", Version: "v0.0.0-20261203120000-abcdef123456+dirty"}}
	for _, c := range []struct {
		exe  string
		bi   *debug.BuildInfo
		want string
	}{
		{"/usr/local/bin/cotal", released, "cotal"},
		{"/home/a/go/bin/cotal", local, "cotal"},
		{"/tmp/go-build3811/b001/exe/cotal", local, "go run ./cmd/cotal"},
		{"/tmp/go-build3811/b001/exe/cotal", nil, "go run ./cmd/cotal"},
		{"/tmp/go-build3811/b001/exe/cotal", stamped, "go run ./cmd/cotal"},
		{"/tmp/go-build3811/b001/exe/cotal", released, "go run " + mod + "@v1.4.0"},
		{"/tmp/go-build3811/b001/cli.test", local, "cotal"}, // a test binary is no go run
		{"/srv/exe/cotal", local, "cotal"},
	} {
		if got := selfCommand(c.exe, c.bi); got != c.want {
			t.Errorf("selfCommand(%q, %v) = %q, want %q", c.exe, c.bi != nil, got, c.want)
		}
	}
}
