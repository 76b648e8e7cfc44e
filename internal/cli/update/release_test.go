package update

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/selfupdate"
)

// release runs scripts/release for linux/amd64 (this machine's kind, so the test can run
// what it built) and darwin/arm64 into a temp folder, and returns the folder.
func release(t *testing.T, version string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-builds cotal twice")
	}
	out := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("../../../scripts/release", "--version", version, "--out", out, "--targets", "linux/amd64 darwin/arm64")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	return out
}

// TestReleaseScript builds two targets and checks what a release holds: one archive per
// target, a SHA256SUMS listing each, binaries of the right OS with the version, commit and
// date stamped; then replaces an installed cotal from the linux archive with
// `cotal update --self --from ARCHIVE --checksums SHA256SUMS`, and refuses a SHA256SUMS
// that does not match with the installed binary unchanged.
func TestReleaseScript(t *testing.T) {
	const version = "v9.8.7-test"
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		head = []byte("unknown") // not a git checkout: the script stamps "unknown"
	}
	dist := release(t, version)
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"SHA256SUMS", "cotal_" + version + "_darwin_arm64.tar.gz", "cotal_" + version + "_linux_amd64.tar.gz"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("dist holds %v, want %v", names, want)
	}
	sums := filepath.Join(dist, "SHA256SUMS")
	linux, darwin := filepath.Join(dist, want[2]), filepath.Join(dist, want[1])
	for _, a := range []string{linux, darwin} {
		if _, err := selfupdate.VerifyChecksum(a, sums); err != nil {
			t.Fatalf("verify %s: %v", a, err)
		}
	}

	unpack := t.TempDir()
	mac, err := selfupdate.ExtractBinary(darwin, unpack)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(mac); len(b) < 4 || !bytes.Equal(b[:4], []byte{0xcf, 0xfa, 0xed, 0xfe}) {
		t.Fatalf("the darwin/arm64 binary is not a 64-bit Mach-O file")
	}
	bin, err := selfupdate.ExtractBinary(linux, unpack)
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var info struct{ Version, Commit, Date string }
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Version != version || info.Commit != strings.TrimSpace(string(head)) ||
		!regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(info.Date) {
		t.Fatalf("stamped %+v, want version %s, commit %s and an RFC 3339 UTC date", info, version, head)
	}

	// An installed cotal of another build: the release binary with bytes after its end
	// (it still runs), so a replacement shows. It runs as the installed cotal would: its own
	// path is the target. Its environment is a home of its own.
	root := t.TempDir()
	home := filepath.Join(root, "home")
	installed := filepath.Join(root, "bin", "cotal")
	if err := os.MkdirAll(filepath.Dir(installed), 0o755); err != nil {
		t.Fatal(err)
	}
	older := append(mustRead(t, bin), "older build"...)
	var runFrom func(from, sums string) (string, error)
	if err := os.WriteFile(installed, older, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(sums string) (string, error) { return runFrom(linux, sums) }
	runFrom = func(from, sums string) (string, error) {
		cmd := exec.Command(installed, "update", "--self", "--from", from, "--checksums", sums)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "COTAL_HOME="+filepath.Join(home, ".cotal"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	bad := filepath.Join(root, "SHA256SUMS.bad")
	s := string(mustRead(t, sums))
	i := strings.Index(s, want[2]) - 3 // a digit of the linux archive's digest
	flip := byte('0')
	if s[i] == '0' {
		flip = '1'
	}
	if err := os.WriteFile(bad, []byte(s[:i]+string(flip)+s[i+1:]), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(bad)
	if err == nil || !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "is unchanged") {
		t.Fatalf("a wrong checksum: err %v, output:\n%s", err, out)
	}
	if !bytes.Equal(mustRead(t, installed), older) {
		t.Fatal("a refused update changed the installed binary")
	}
	if m, _ := filepath.Glob(filepath.Join(root, "bin", ".cotal.update-*")); len(m) > 0 {
		t.Fatalf("a refused update left %v", m)
	}

	out, err = run(sums)
	if err != nil {
		t.Fatalf("update --self from the archive: %v\n%s", err, out)
	}
	if !strings.Contains(out, "matches "+sums) || !strings.Contains(out, "replaced "+installed) || !strings.Contains(out, "cotal version "+version) {
		t.Fatalf("update --self said:\n%s", out)
	}
	if !bytes.Equal(mustRead(t, installed), mustRead(t, bin)) {
		t.Fatal("the installed binary is not the archive's")
	}

	// A bare binary with a SHA256SUMS that lists it: checked, then run and installed from
	// the private copy.
	bare := filepath.Join(root, "cotal-next")
	if err := os.WriteFile(bare, mustRead(t, bin), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(mustRead(t, bare))
	bareSums := filepath.Join(root, "bare.sums")
	if err := os.WriteFile(bareSums, []byte(hex.EncodeToString(sum[:])+"  cotal-next\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(installed, older, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := runFrom(bare, bareSums); err != nil || !strings.Contains(out, "cotal version "+version) {
		t.Fatalf("update --self from a checked binary: %v\n%s", err, out)
	}
	if !bytes.Equal(mustRead(t, installed), mustRead(t, bin)) {
		t.Fatal("the installed binary is not the checked one")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
