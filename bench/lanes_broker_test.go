package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/trust"
)

// lanesBrokerEnv says where BenchmarkLanes runs its broker: "embedded" (the default) in
// the benchmark's own process, "process" in a child process of its own, as a lane host
// (`cotal deliver --spaces`, `cotal authservice --spaces`) runs beside its broker in
// production. In a process of its own the broker's memory, goroutines and sockets are no
// longer counted as the lanes'.
const lanesBrokerEnv = "COTAL_BENCH_LANES_BROKER"

// The values of lanesBrokerEnv.
const (
	laneBrokerEmbedded = "embedded"
	laneBrokerProcess  = "process"
)

// laneChildEnv carries the path of a laneChildConfig to TestLanesBrokerChild; the test is
// skipped without it.
const laneChildEnv = "COTAL_BENCH_LANES_CHILD"

// lanesBrokerProfileEnv, with the broker in a process of its own, names a file for a CPU
// profile of that process from the end of provisioning to the end of the lanes' last
// round (the lanes' connects and serving, broker side).
const lanesBrokerProfileEnv = "COTAL_BENCH_LANES_BROKER_CPUPROFILE"

// laneChildProfiled is the line the broker process writes on its stdout once its profile
// is written.
const laneChildProfiled = "cotal-bench-lanes-broker-profiled"

// laneChildReady is the line the broker process writes on its stdout once every space is
// provisioned and its URL and credentials are written.
const laneChildReady = "cotal-bench-lanes-broker-ready"

// laneBrokerMode returns lanesBrokerEnv's value, embedded when unset.
func laneBrokerMode(b *testing.B) string {
	switch v := os.Getenv(lanesBrokerEnv); v {
	case "", laneBrokerEmbedded:
		return laneBrokerEmbedded
	case laneBrokerProcess:
		return v
	default:
		b.Fatalf("%s=%q: want %q or %q", lanesBrokerEnv, v, laneBrokerEmbedded, laneBrokerProcess)
		return ""
	}
}

// laneChildConfig is what the broker process is told: the trust chain whose accounts it
// holds, the spaces to provision (every one already has an account and limits in the
// chain), and where it keeps its store and writes what it hands back.
type laneChildConfig struct {
	TrustDir string   `json:"trust_dir"`
	Spaces   []string `json:"spaces"`
	Kind     string   `json:"kind"`      // "auth" or "delivery"; for the progress lines only
	StoreDir string   `json:"store_dir"` // the broker's store
	OutDir   string   `json:"out_dir"`   // url (the client URL) and <space>.creds (0600)
	Profile  string   `json:"profile"`   // a CPU profile's file; none when empty
}

// laneBroker is a broker running in a child process, its spaces provisioned.
type laneBroker struct {
	pid   int
	url   string
	creds map[string][]byte // each space's delivery credential
}

// laneBrokerStartLimit bounds the wait for the broker process to provision n spaces:
// 10 minutes, and 200 ms a space beyond 3000 (5000 took under 5 minutes).
func laneBrokerStartLimit(n int) time.Duration {
	return max(10*time.Minute, time.Duration(n)*200*time.Millisecond)
}

// startLaneBroker re-executes this test binary as TestLanesBrokerChild with cfg (its
// StoreDir and OutDir filled in here), waits until it reports ready and reads back its URL
// and the spaces' delivery credentials. The child is killed in b's cleanup; it also ends
// when its stdin closes, and on Linux when this process dies.
func startLaneBroker(b *testing.B, cfg laneChildConfig) *laneBroker {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatalf("broker process: %v", err)
	}
	dir := b.TempDir()
	cfg.StoreDir, cfg.OutDir = filepath.Join(dir, "store"), filepath.Join(dir, "out")
	if p := os.Getenv(lanesBrokerProfileEnv); p != "" {
		cfg.Profile = fmt.Sprintf("%s.%s-%d", p, cfg.Kind, len(cfg.Spaces))
	}
	if err := os.Mkdir(cfg.OutDir, 0o700); err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "child.json")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestLanesBrokerChild$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), laneChildEnv+"="+cfgPath)
	cmd.Stderr = os.Stderr
	setChildProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("broker process: %v", err)
	}
	ready, profiled := make(chan struct{}), make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			switch sc.Text() {
			case laneChildReady:
				close(ready)
				continue
			case laneChildProfiled:
				close(profiled)
				continue
			}
			fmt.Fprintln(os.Stderr, sc.Text()) // the test binary's own lines (PASS, logs)
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	// Registered after b.TempDir, so it runs before the directory is removed.
	b.Cleanup(func() {
		_ = stdin.Close() // the child stops its profile and writes it
		if cfg.Profile != "" {
			select {
			case <-profiled:
				fmt.Fprintf(os.Stderr, "lanes: broker process CPU profile in %s\n", cfg.Profile)
			case <-time.After(time.Minute):
			}
		}
		killChild(cmd) // rather than wait minutes for its close
		select {
		case <-exited:
		case <-time.After(time.Minute):
			b.Errorf("broker process %d did not end within a minute of its kill", cmd.Process.Pid)
		}
	})
	limit := laneBrokerStartLimit(len(cfg.Spaces))
	select {
	case <-ready:
	case err := <-exited:
		exited <- err // for the cleanup
		b.Fatalf("broker process ended before ready: %v", err)
	case <-time.After(limit):
		b.Fatalf("broker process not ready within %s", limit)
	case <-b.Context().Done():
		b.Fatal(b.Context().Err())
	}
	lb := &laneBroker{pid: cmd.Process.Pid, creds: make(map[string][]byte, len(cfg.Spaces))}
	url, err := os.ReadFile(filepath.Join(cfg.OutDir, "url"))
	if err != nil {
		b.Fatalf("broker process: %v", err)
	}
	lb.url = string(url)
	for _, s := range cfg.Spaces {
		c, err := os.ReadFile(filepath.Join(cfg.OutDir, s+".creds"))
		if err != nil {
			b.Fatalf("broker process: %v", err)
		}
		lb.creds[s] = c
	}
	return lb
}

// resident is the broker process's resident set; false where it cannot be read.
func (lb *laneBroker) resident() (int64, bool) {
	return residentOf("/proc/" + strconv.Itoa(lb.pid) + "/status")
}

// TestLanesBrokerChild is BenchmarkLanes's broker process (COTAL_BENCH_LANES_BROKER=process),
// not a test: given laneChildEnv it starts an operator-mode broker on the chain's accounts,
// provisions the spaces as the embedded mode does, writes its URL and the delivery
// credentials, says so on stdout, and serves until its stdin closes.
func TestLanesBrokerChild(t *testing.T) {
	path := os.Getenv(laneChildEnv)
	if path == "" {
		t.Skip("BenchmarkLanes's broker process: runs only when " + laneChildEnv + " names its configuration")
	}
	start := time.Now()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg laneChildConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	chain, err := trust.Open(cfg.TrustDir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startLaneBrokerServer(t.Context(), chain, cfg.StoreDir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	creds, err := provisionLaneSpaces(t.Context(), chain, srv, cfg.Spaces, start)
	if err != nil {
		t.Fatalf("%s lanes' broker: %v", cfg.Kind, err)
	}
	for s, c := range creds {
		if err := os.WriteFile(filepath.Join(cfg.OutDir, s+".creds"), c, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "url"), []byte(srv.ClientURL()), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "lanes setup: broker process %d provisioned %d %s spaces in %s\n",
		os.Getpid(), len(cfg.Spaces), cfg.Kind, time.Since(start).Round(time.Second))
	var prof *os.File
	if cfg.Profile != "" {
		if prof, err = os.Create(cfg.Profile); err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println(laneChildReady)
	// Serve until the benchmark closes stdin (or kills this process).
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Logf("stdin: %v", err)
	}
	if prof != nil {
		pprof.StopCPUProfile()
		if err := prof.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Println(laneChildProfiled)
	}
}

// residentOf reads VmRSS from a /proc/<pid>/status file; false where it cannot.
func residentOf(status string) (int64, bool) {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}
