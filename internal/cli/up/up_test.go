package up

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
)

func TestNewCmdUp(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string
	}{
		{args: []string{"--open"}, want: Options{Open: true}},
		{args: []string{"--open", "--space", "prod", "--server", "nats://127.0.0.1:4333", "--detach", "--store-dir", "/s"},
			want: Options{Open: true, Space: "prod", Server: "nats://127.0.0.1:4333", Detach: true, StoreDir: "/s"}},
		{args: nil, want: Options{}},
		{args: []string{"--open", "--space", "a b"}, wantErr: "invalid space name"},
		{args: []string{"--open", "--server", "nats://127.0.0.1"}, wantErr: "needs a port"},
		{args: []string{"--open", "--server", "nats://127.0.0.1:70000"}, wantErr: "is not 0 to 65535"},
		{args: []string{"--open", "extra"}, wantErr: "unknown command"},
		{args: []string{"--cluster-name", "c", "--cluster-listen", "127.0.0.1:6222", "--routes", "nats://127.0.0.1:6222,nats://127.0.0.1:6223"},
			want: Options{ClusterName: "c", ClusterListen: "127.0.0.1:6222", Routes: "nats://127.0.0.1:6222,nats://127.0.0.1:6223"}},
		{args: []string{"--cluster-name", "c"}, wantErr: "--cluster-name needs --cluster-listen HOST:PORT and --routes"},
		{args: []string{"--routes", "nats://a:6222"}, wantErr: "--cluster-listen and --routes go with --cluster-name"},
		{args: []string{"--cluster-name", "c", "--cluster-listen", "6222", "--routes", "nats://a:6222"}, wantErr: "is not HOST:PORT"},
		{args: []string{"--cluster-name", "c", "--cluster-listen", ":6222", "--routes", "nats://a"}, wantErr: "needs a port"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdUp, tt.args)
			if !cmdtest.Parsed(t, err, got != nil, tt.wantErr) {
				return
			}
			if got.Open != tt.want.Open || got.Space != tt.want.Space || got.Server != tt.want.Server ||
				got.Detach != tt.want.Detach || got.StoreDir != tt.want.StoreDir ||
				got.ClusterName != tt.want.ClusterName || got.ClusterListen != tt.want.ClusterListen || got.Routes != tt.want.Routes {
				t.Fatalf("opts %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestListenAddr(t *testing.T) {
	for _, tt := range []struct {
		in   string
		host string
		port int
		ok   bool
	}{
		{"", "127.0.0.1", 0, true},
		{"nats://127.0.0.1:4222", "127.0.0.1", 4222, true},
		{"nats://0.0.0.0:0", "0.0.0.0", -1, true},
		{"tls://127.0.0.1:4222", "", 0, false},
		{"127.0.0.1:4222", "", 0, false},
	} {
		host, port, err := listenAddr(tt.in)
		if (err == nil) != tt.ok || host != tt.host || port != tt.port {
			t.Errorf("listenAddr(%q) = %q, %d, %v", tt.in, host, port, err)
		}
	}
}

// TestCheckWritable: a folder that cannot take a file is refused with the command that
// fixes it, and the check leaves nothing behind.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := checkWritable("to add space x", dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the check left %v", left)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := checkWritable("to add space x", dir, notDir)
	if err == nil || !strings.Contains(err.Error(), "refusing to add space x: "+notDir+" is not writable") ||
		!strings.Contains(err.Error(), "next: run `chmod u+w "+notDir+"`") {
		t.Fatalf("not a folder: %v", err)
	}
	if os.Geteuid() == 0 {
		return // root writes anywhere: the mode check below would not hold
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := checkWritable("to add space x", ro); err == nil {
		t.Fatal("a read-only folder passed")
	}
}
