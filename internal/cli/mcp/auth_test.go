package mcp_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/trust"
)

// On a project's authenticated mesh, `cotal mcp --name` connects with an agent credential
// minted for it (profile agent, its own actor), never the operator's provisioner one.
func TestNamedAgentOnAnAuthenticatedMeshHoldsAnAgentCredential(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "COTAL_HOME=" + filepath.Join(dir, ".cotal-home"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"), "PATH=" + os.Getenv("PATH")}
	cotal := func(args ...string) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cotal %v: %v\n%s", args, err, out)
		}
	}
	cotal("up", "--detach", "--server", "nats://127.0.0.1:0", "--space", space)
	t.Cleanup(func() { cotal("down") })

	a := startAgentIn(t, dir, nil, env, "--name", "ada")
	a.ok(t, "cotal_send", map[string]any{"text": "hello"}, nil)

	var mesh struct {
		Server string `json:"server"`
	}
	b, err := os.ReadFile(filepath.Join(dir, ".cotal", "mesh.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &mesh); err != nil {
		t.Fatal(err)
	}
	chain, err := trust.Open(filepath.Join(dir, ".cotal", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(sys)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(mesh.Server, c.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg, err := nc.Request("$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"auth": true, "limit": 1024}`), 10*time.Second)
	if err != nil {
		t.Fatalf("CONNZ: %v", err)
	}
	var page struct {
		Data struct {
			Conns []struct {
				Name string   `json:"name"`
				Tags []string `json:"tags"`
			} `json:"connections"`
		} `json:"data"`
	}
	if err := json.Unmarshal(msg.Data, &page); err != nil {
		t.Fatalf("CONNZ: %v", err)
	}
	found := false
	for _, conn := range page.Data.Conns {
		if !slices.Contains(conn.Tags, "actor:ada") {
			continue
		}
		found = true
		if !slices.Contains(conn.Tags, "profile:"+string(trust.ProfileAgent)) {
			t.Errorf("connection %q holds tags %v, want profile:%s", conn.Name, conn.Tags, trust.ProfileAgent)
		}
	}
	if !found {
		t.Fatalf("no connection of actor ada in CONNZ: %s", msg.Data)
	}
}
