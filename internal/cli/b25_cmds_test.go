package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/trust"
)

// refNames are the variables the reference's connectors read (connector-core config.ts,
// configFromEnv) that refAgent passes on; every other COTAL_* variable is dropped, so the
// server it starts sees only the names a reference launcher sets.
var refNames = map[string]bool{"COTAL_LAUNCH_MATERIAL": true, "COTAL_NAME": true, "COTAL_SPACE": true,
	"COTAL_LIFECYCLE_UID": true, "COTAL_SUBSCRIBE": true, "COTAL_ALLOW_SUBSCRIBE": true,
	"COTAL_ALLOW_PUBLISH": true, "COTAL_KIND": true, "COTAL_ROLE": true, "COTAL_MODEL": true}

// refAgent is `refagent SERVERS CREDS SPACE NAME TEXT WANT`: a reference launcher starting
// this binary's `cotal mcp`. It writes the servers and the creds path into a 0600 launch
// material file (core launch-material.ts, writeLaunchMaterial), sets only the reference's
// names (the lifecycle uid read from the creds), runs `cotal mcp` outside any project
// through the SDK's client, prints the COTAL_ names it set and its roster line, posts TEXT
// with cotal_send and calls cotal_inbox until an item carries WANT. It exits 1 on any
// failure and after 30 s (a hang guard).
func refAgent() int {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: refagent SERVERS CREDS SPACE NAME TEXT WANT")
		return 2
	}
	if err := runRefAgent(os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6]); err != nil {
		fmt.Fprintln(os.Stderr, "refagent:", err)
		return 1
	}
	return 0
}

func runRefAgent(servers, credsPath, space, name, text, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := os.ReadFile(credsPath)
	if err != nil {
		return err
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(credsPath)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cotal-launch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	material, _ := json.Marshal(map[string]string{"servers": servers, "creds": abs})
	mpath := filepath.Join(dir, "material.json")
	if err := os.WriteFile(mpath, material, 0o600); err != nil {
		return err
	}
	set := map[string]string{"COTAL_LAUNCH_MATERIAL": mpath, "COTAL_NAME": name, "COTAL_SPACE": space,
		"COTAL_LIFECYCLE_UID": c.LifecycleUID, "COTAL_SUBSCRIBE": "general", "COTAL_ALLOW_SUBSCRIBE": "general",
		"COTAL_ALLOW_PUBLISH": "general", "COTAL_KIND": "agent"}
	// A fresh home and config dir, and no other COTAL_* variable: nothing but the
	// reference's names can tell the server where the mesh is or who it is.
	home, err := os.MkdirTemp("", "refagent-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	var env, names []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); {
		case strings.HasPrefix(k, "COTAL_"), k == "HOME", k == "XDG_CONFIG_HOME", k == "TMPDIR":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "TMPDIR="+home)
	for k, v := range set {
		if !refNames[k] {
			return fmt.Errorf("%s is not a reference name", k)
		}
		env = append(env, k+"="+v)
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Println("env:", strings.Join(names, " "))
	// Outside any project: beside the scripts' work folders, none of whose .cotal is an
	// ancestor (TMPDIR is inside this script's).
	cwd, err := os.MkdirTemp(filepath.Dir(os.Getenv("WORK")), "refagent-cwd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cwd)
	exe, err := exec.LookPath("cotal")
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "mcp")
	cmd.Env, cmd.Dir, cmd.Stderr = env, cwd, os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "refagent", Version: "test"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start the mcp server: %w", err)
	}
	defer session.Close()
	return exerciseAgent(ctx, session, name, text, want)
}
