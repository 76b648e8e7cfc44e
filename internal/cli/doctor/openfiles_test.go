package doctor

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The open-files check fails near the limit, warns before it or when the mesh serves more
// spaces than the limit holds written at once, and passes otherwise; each verdict that is
// not a pass names the fix.
func TestOpenFilesVerdicts(t *testing.T) {
	for _, c := range []struct {
		inUse, soft uint64
		spaces      int
		want        string
		says        string
	}{
		{inUse: 300, soft: 20000, spaces: 1, want: StatusOK, says: "300 of 20000 open files in use; the limit holds 749 spaces written at once and this mesh serves 1"},
		{inUse: 16000, soft: 20000, spaces: 1, want: StatusWarn, says: "near the limit"},
		{inUse: 19000, soft: 20000, spaces: 1, want: StatusFail, says: "fails stream writes"},
		{inUse: 300, soft: 20000, spaces: 750, want: StatusWarn, says: "runs the broker out of files"},
		{inUse: 300, soft: 20000, spaces: 749, want: StatusOK},
		{inUse: 3, soft: 0, spaces: 1, want: StatusWarn, says: "may open no file"},
	} {
		got := openFilesCheck(c.inUse, c.soft, 20000, c.spaces)
		if got.Status != c.want || !strings.Contains(got.Message, c.says) {
			t.Errorf("%d of %d files, %d spaces: %s %q; want %s saying %q", c.inUse, c.soft, c.spaces, got.Status, got.Message, c.want, c.says)
		}
		if c.want != StatusOK && c.soft > 0 && !strings.Contains(got.Message, "raise the broker's open-file limit") {
			t.Errorf("%d of %d files, %d spaces: %q names no fix", c.inUse, c.soft, c.spaces, got.Message)
		}
	}
}

// processFiles reads a process's open files and limit from a proc tree: this process's
// own where there is one, and a planted tree with a broken limits table, refused.
func TestProcessFiles(t *testing.T) {
	if runtime.GOOS == "linux" {
		inUse, soft, hard, err := processFiles("/proc", os.Getpid())
		if err != nil || inUse == 0 || soft == 0 || hard < soft {
			t.Fatalf("this process: %d open of %d (hard %d), %v", inUse, soft, hard, err)
		}
	}
	proc := t.TempDir()
	dir := filepath.Join(proc, "42")
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, "fd", strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write := func(limits string) {
		if err := os.WriteFile(filepath.Join(dir, "limits"), []byte(limits), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max processes             91903                91903                processes \n" +
		"Max open files            1024                 unlimited            files     \n")
	inUse, soft, hard, err := processFiles(proc, 42)
	if err != nil || inUse != 3 || soft != 1024 || hard != ^uint64(0) {
		t.Fatalf("planted tree: %d open of %d (hard %d), %v; want 3 of 1024, unlimited", inUse, soft, hard, err)
	}
	write("Max open files            lots                 20000                files     \n")
	if _, _, _, err := processFiles(proc, 42); err == nil || !strings.Contains(err.Error(), "soft limit") {
		t.Fatalf("a soft limit that is not a number: %v; want it refused", err)
	}
	write("Max processes             91903                91903                processes \n")
	if _, _, _, err := processFiles(proc, 42); err == nil || !strings.Contains(err.Error(), "Max open files") {
		t.Fatalf("no open-files row: %v; want it named", err)
	}
}

// parseOpenFileLimit never panics, and what it accepts is a row of two limits.
func FuzzParseOpenFileLimit(f *testing.F) {
	f.Add([]byte("Max open files            20000                20000                files     \n"))
	f.Add([]byte("Max open files unlimited unlimited\n"))
	f.Add([]byte("Max open files 1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		soft, hard, err := parseOpenFileLimit(b)
		if err != nil {
			return
		}
		if !strings.Contains(string(b), "Max open files") {
			t.Fatalf("accepted %q without its row: %d, %d", b, soft, hard)
		}
	})
}
