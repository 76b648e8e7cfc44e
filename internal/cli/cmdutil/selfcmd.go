package cmdutil

import (
	"path/filepath"
	"runtime/debug"
	"strings"
)

// SelfCommand is how a person runs this cotal again for a next step: "cotal", or, for a
// binary `go run` built (it lives in a go-build temporary folder, which go run deletes
// once the command returns), the same go run: "go run ./cmd/cotal" for the checkout's own
// build (run from its root, as the quick start does), "go run <module>/cmd/cotal@<version>"
// for a module go run fetched.
func SelfCommand(executable func() (string, error)) string {
	if executable == nil {
		return "cotal"
	}
	exe, err := executable()
	if err != nil {
		return "cotal"
	}
	bi, _ := debug.ReadBuildInfo()
	return selfCommand(exe, bi)
}

func selfCommand(exe string, bi *debug.BuildInfo) string {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) != "exe" || !strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return "cotal"
	}
	// A module go run fetched has a checksum; the checkout's own build (even one stamped
	// with a version from its VCS) has none.
	if bi == nil || bi.Main.Sum == "" || bi.Main.Version == "" || bi.Main.Version == "(devel)" || bi.Path == "" {
		return "go run ./cmd/cotal"
	}
	return "go run " + bi.Path + "@" + bi.Main.Version
}
