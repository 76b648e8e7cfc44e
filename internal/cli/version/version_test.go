package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      debug.BuildInfo
		want    Info
	}{
		{"local build", "dev", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{Version: "dev", Commit: unknown, Date: unknown, Go: "go1.26.8"}},
		{"local build from git", "dev", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			Info{Version: "dev", Commit: "0123456789abcdef", Date: "2026-01-02T15:04:05Z", Modified: true, Go: "go1.26.8"}},
		{"go install @tag", "dev", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}},
			Info{Version: "v1.4.0", Commit: unknown, Date: unknown, Go: "go1.26.8"}},
		{"go install @commit", "dev", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.1-0.20260102150405-abcdef123456"}},
			Info{Version: "v1.4.1-0.20260102150405-abcdef123456", Commit: "abcdef123456", Date: "2026-01-02T15:04:05Z", Go: "go1.26.8"}},
		{"go install @main, no tag", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20260102150405-abcdef123456"}},
			Info{Version: "v0.0.0-20260102150405-abcdef123456", Commit: "abcdef123456", Date: "2026-01-02T15:04:05Z", Go: "go1.26.8"}},
		{"ldflags win", "v2.0.0", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: vcs[:1]},
			Info{Version: "v2.0.0", Commit: "0123456789abcdef", Date: unknown, Go: "go1.26.8"}},
		{"a prerelease is no pseudo-version", "dev", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0-rc-1"}},
			Info{Version: "v1.4.0-rc-1", Commit: unknown, Date: unknown, Go: "go1.26.8"}},
	} {
		if got := FromBuildInfo(tc.stamped, &tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestWithStamps: a commit and date stamped at link time (scripts/release) win over the
// toolchain's VCS stamp; unstamped, the VCS stamp stays.
func TestWithStamps(t *testing.T) {
	in := Info{Version: "v1.2.3", Commit: "abc", Date: "2026-01-02T03:04:05Z", Modified: true, Go: "go1.26"}
	if got := withStamps(in, "", ""); got != in {
		t.Fatalf("unstamped: %+v", got)
	}
	got := withStamps(in, "0123456789abcdef0123456789abcdef01234567", "2026-12-03T15:31:53Z")
	if got.Commit != "0123456789abcdef0123456789abcdef01234567" || got.Date != "2026-12-03T15:31:53Z" || got.Version != "v1.2.3" {
		t.Fatalf("stamped: %+v", got)
	}
}
