package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// exitedPid returns the pid of a process that has exited and been reaped.
func exitedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.ProcessState.Pid()
}

func TestPidfileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nats.pid")
	if _, err := ReadPidfile(path); !errors.Is(err, ErrNoPidfile) {
		t.Fatalf("ReadPidfile before write: %v, want ErrNoPidfile", err)
	}
	pid := os.Getpid()
	if err := WritePidfile(path, pid); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != strconv.Itoa(pid)+"\n" {
		t.Fatalf("pidfile holds %q", raw)
	}
	for _, f := range []string{path, path + ".identity"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	r, err := ReadPidfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.PID != pid {
		t.Fatalf("PID = %d, want %d", r.PID, pid)
	}
	if runtime.GOOS == "linux" && r.Start == "" {
		t.Fatal("empty start time on linux")
	}
	if alive, err := r.Alive(); err != nil || !alive {
		t.Fatalf("own process Alive = %v, %v; want true", alive, err)
	}
	for range 2 { // the second removal finds nothing and is fine
		if err := RemovePidfile(path); err != nil {
			t.Fatal(err)
		}
	}
	if n := names(t, filepath.Dir(path)); len(n) != 0 {
		t.Fatalf("left behind %q", n)
	}
}

func TestAlive(t *testing.T) {
	self, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		rec   Record
		alive bool
		err   bool
		linux bool // the start-time guard only exists on linux
	}{
		{"this process", Record{PID: os.Getpid(), Start: self}, true, false, false},
		{"right pid, other start (pid reused)", Record{PID: os.Getpid(), Start: "1"}, false, false, true},
		{"right pid, empty start", Record{PID: os.Getpid()}, false, false, true},
		{"exited process", Record{PID: exitedPid(t), Start: self}, false, false, false},
		{"zero pid", Record{}, false, true, false},
		{"negative pid", Record{PID: -5}, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.linux && runtime.GOOS != "linux" {
				t.Skip("no start-time guard on " + runtime.GOOS)
			}
			alive, err := tt.rec.Alive()
			if (err != nil) != tt.err || alive != tt.alive {
				t.Fatalf("Alive = %v, %v; want %v, error %v", alive, err, tt.alive, tt.err)
			}
		})
	}
}

func TestWritePidfileRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, pid := range []int{0, -1, exitedPid(t)} {
		path := filepath.Join(dir, "p"+strconv.Itoa(pid)+".pid")
		if err := WritePidfile(path, pid); err == nil {
			t.Errorf("WritePidfile(%d) succeeded", pid)
		}
	}
	if n := names(t, dir); len(n) != 0 {
		t.Fatalf("left behind %q", n)
	}
}

func TestReadPidfileTorn(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	tests := []struct {
		name     string
		pidfile  *string // nil: absent
		identity *string // nil: absent
		noFile   bool    // want ErrNoPidfile
		want     string  // substring of any other error
	}{
		{"both absent", nil, nil, true, ""},
		{"identity alone (crash mid-write or mid-remove)", nil, ptr(`{"pid":` + pid + `,"start":"1"}`), true, ""},
		{"pid without identity", ptr(pid + "\n"), nil, false, "is torn: pid " + pid + " has no identity file"},
		{"mismatched pids", ptr(pid + "\n"), ptr(`{"pid":1,"start":"1"}`), false, "is torn: it names pid " + pid + " but identity"},
		{"identity not JSON", ptr(pid + "\n"), ptr(`{"pid":`), false, "is torn: identity"},
		{"pid not a number", ptr("abc\n"), ptr(`{"pid":1,"start":"1"}`), false, `"abc" is not a process id`},
		{"pid zero", ptr("0\n"), ptr(`{"pid":0,"start":"1"}`), false, `"0" is not a process id`},
		{"empty pidfile", ptr(""), ptr(`{"pid":1,"start":"1"}`), false, `"" is not a process id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.pid")
			for f, content := range map[string]*string{path: tt.pidfile, path + ".identity": tt.identity} {
				if content != nil {
					if err := os.WriteFile(f, []byte(*content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			r, err := ReadPidfile(path)
			if tt.noFile {
				if !errors.Is(err, ErrNoPidfile) {
					t.Fatalf("ReadPidfile = %+v, %v; want ErrNoPidfile", r, err)
				}
				return
			}
			if err == nil || errors.Is(err, ErrNoPidfile) {
				t.Fatalf("ReadPidfile = %+v, %v; want a torn-pidfile error", r, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q lacks %q or the path", err, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
