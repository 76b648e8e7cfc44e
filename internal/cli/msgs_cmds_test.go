package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// The sweep's bounds: a case that runs longer is a hang, one that holds more memory reads
// without a bound.
const (
	sweepTimeout = 20 * time.Second
	sweepMaxRSS  = 512 << 20
)

// sweepPending are kinds of sweep case that fail on this branch for some commands because
// another slice of the same issue fixes them; such a failure is reported as PENDING, not
// failed. Empty the list once those fixes are merged.
var sweepPending = map[string]string{}

// fileFlags are the flags that name a file cotal reads.
var fileFlags = []string{"creds", "tls-ca", "tls-cert", "tls-key", "from", "spaces", "file"}

// notFileFrom are commands whose --from is not a file: a URL (meshes add), or the
// binary update installs over this one, which the sweep leaves alone (update_self).
var notFileFrom = []string{"cotal meshes add", "cotal update"}

// sweepArgs are arguments that get a command past its argument checks to where it reads a
// file: the sweep adds one bad input at a time to them.
var sweepArgs = map[string][]string{
	"cotal actor grant":     {"alice", "--sub", "s", "--scope", "spawn"},
	"cotal actor revoke":    {"alice"},
	"cotal channels set":    {"general", "--live"},
	"cotal deliver pending": {"bob"},
	"cotal mint":            {"x", "--profile", "observer", "--out", "x.creds"},
	"cotal personas new":    {"x"},
	"cotal send ask":        {"role", "hi"},
	"cotal send dm":         {"bob", "hi"},
	"cotal send msg":        {"general", "hi"},
	"cotal join":            {"--name", "x"},
	"cotal mcp":             {"--name", "x"},
	"cotal attach":          {"--name", "x"},
	"cotal input":           {"--name", "x", "--text", "t"},
	"cotal stop":            {"--name", "x"},
	"cotal login":           {"--idp", "http://127.0.0.1:1", "--status"},
	"cotal meshes add":      {"s"},
	"cotal broker config":   {"--out", "nats.conf"},
	"cotal broker export":   {"chain.tar"},
	"cotal broker import":   {"chain.tar"},
	"cotal ext add":         {"./cotal-x"},
	"cotal ext rm":          {"x"},
	"cotal personas rm":     {"x", "--force"},
	"cotal personas show":   {"x"},
	"cotal meshes rm":       {"s"},
}

// noRun are commands the sweep gives only an unknown flag: run for real they would start
// something that outlives the case or change the machine (a completion script is printed
// whatever the input, `help` takes topics).
var noRun = []string{"cotal up", "cotal down", "cotal setup", "cotal service install", "cotal service uninstall", "cotal update", "cotal web", "cotal supervise", "cotal auth-service", "cotal deliver", "cotal console", "cotal help", "cotal version"}

// sweepCase is one bad input to one command.
type sweepCase struct {
	cmd   string   // command path, "cotal mint"
	kind  string   // "unknown flag", "missing argument", "--creds /dev/zero", ...
	args  []string // after "cotal"
	usage bool     // must exit 2; else 1 or 2
}

// cmdSweep runs every command with bad inputs through the real binary, in the script's
// folder (a project whose mesh runs):
//
//	sweep
//
// Each case must end within sweepTimeout and hold under sweepMaxRSS, exit 1 or 2 (2 for a
// usage error), print one line on stderr saying what was wrong ("error: ..." or "✗ ..."),
// optionally followed by a "next: run" or "see" line, nothing raw (no panic, no log
// record), and leave the folder's files as they were. It prints the counts.
func cmdSweep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: sweep")
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	dir := ts.MkAbs(".")
	for _, f := range []string{"afile", "adir/.keep"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			ts.Fatalf("%v", err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			ts.Fatalf("%v", err)
		}
	}
	bad := map[string]string{
		"unreadable": filepath.Join(dir, "afile", "nope"), // under a file: unreadable even by root
		"/dev/zero":  "/dev/zero",
		"a folder":   filepath.Join(dir, "adir"),
	}
	var cases []sweepCase
	ios, _, _, _ := iostreams.Test()
	root := cli.NewCmdRoot(&cmdutil.Factory{IO: ios, Getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				visit(sub)
			}
		}
		if c == root || (c.HasSubCommands() && c.Name() != "deliver") {
			return
		}
		path := c.CommandPath()
		words := strings.Fields(path)[1:]
		cases = append(cases, sweepCase{cmd: path, kind: "unknown flag", args: append(slices.Clone(words), "--no-such-flag"), usage: true})
		if slices.Contains(noRun, path) {
			return
		}
		if needsArgs(c) {
			cases = append(cases, sweepCase{cmd: path, kind: "missing argument", args: slices.Clone(words), usage: true})
		}
		for _, name := range fileFlags {
			if c.Flags().Lookup(name) == nil || (name == "from" && slices.Contains(notFileFrom, path)) {
				continue
			}
			flag := "--" + name
			if name == "file" {
				flag = "-f"
			}
			for _, in := range []string{"unreadable", "/dev/zero", "a folder"} {
				a := append(append(slices.Clone(words), sweepArgs[path]...), flag, bad[in])
				cases = append(cases, sweepCase{cmd: path, kind: flag + " " + in, args: a})
			}
		}
	}
	visit(root)

	var ok, pending, failed int
	for _, sc := range cases {
		problem := runSweepCase(ts, exe, dir, sc)
		why, isPending := sweepPending[sc.cmd+" "+sc.kind]
		if !isPending {
			why, isPending = sweepPending[sc.kind]
		}
		switch {
		case problem == "":
			ok++
		case isPending:
			pending++
			ts.Logf("PENDING (%s): cotal %s: %s", why, strings.Join(sc.args, " "), problem)
		default:
			failed++
			ts.Logf("FAIL: cotal %s: %s", strings.Join(sc.args, " "), problem)
		}
	}
	fmt.Fprintf(ts.Stdout(), "sweep: %d cases, %d refused cleanly, %d pending another slice's fix, %d failed\n", len(cases), ok, pending, failed)
	if failed > 0 {
		ts.Fatalf("sweep: %d of %d cases failed", failed, len(cases))
	}
}

// needsArgs reports whether c's usage names a required positional argument or a required
// flag that the sweep leaves out.
func needsArgs(c *cobra.Command) bool {
	use := strings.Fields(c.Use)
	if len(use) > 1 && strings.HasPrefix(use[1], "<") {
		return true
	}
	return slices.Contains([]string{"cotal attach", "cotal input", "cotal stop", "cotal join", "cotal mcp", "cotal login"}, c.CommandPath())
}

// runSweepCase runs one case and says what was wrong with how it ended, or "".
func runSweepCase(ts *testscript.TestScript, exe, dir string, sc sweepCase) string {
	before := snapshot(dir)
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, sc.args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return "start: " + err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
	bloated := false
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			if rss(cmd.Process.Pid) > sweepMaxRSS {
				bloated = true
				_ = cmd.Process.Kill()
			}
		}
	}
	switch {
	case bloated:
		return fmt.Sprintf("held over %d MiB: reads without a bound", sweepMaxRSS>>20)
	case ctx.Err() != nil:
		return fmt.Sprintf("still running after %s: a hang", sweepTimeout)
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		return "wait: " + err.Error()
	}
	var problems []string
	switch {
	case code == 0:
		problems = append(problems, "accepted (exit 0)")
	case sc.usage && code != 2:
		problems = append(problems, fmt.Sprintf("exit %d, want 2 (a usage error)", code))
	case code != 1 && code != 2:
		problems = append(problems, fmt.Sprintf("exit %d, want 1 or 2", code))
	}
	if p := oneClearLine(stderr.String()); p != "" && code != 0 {
		problems = append(problems, p)
	}
	if changed := diffSnapshots(before, snapshot(dir)); changed != "" {
		problems = append(problems, "changed files: "+changed)
	}
	return strings.Join(problems, "; ")
}

// oneClearLine checks a refusal's stderr: one line saying what was wrong, then at most a
// next or see line.
func oneClearLine(stderr string) string {
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return "nothing on stderr"
	}
	if !strings.HasPrefix(lines[0], "error: ") && !strings.HasPrefix(lines[0], "✗ ") {
		return fmt.Sprintf("stderr starts %q, not error: or ✗", firstN(lines[0], 80))
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "next: run `") && !strings.HasPrefix(l, "see `") {
			return fmt.Sprintf("more than one line on stderr: %q", firstN(stderr, 200))
		}
	}
	for _, raw := range []string{"panic:", "goroutine ", "level=", "fatal error"} {
		if strings.Contains(stderr, raw) {
			return fmt.Sprintf("stderr holds %q", raw)
		}
	}
	return ""
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// rss is the resident memory of pid in bytes, 0 when unknown.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// snapshot lists the files under dir with size, mode and modification time, leaving out
// what a running mesh changes by itself: its store and its logs.
func snapshot(dir string) map[string]string {
	m := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == filepath.Join(".cotal", "nats") || d.Name() == "tmp") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".log") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m[rel] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return m
}

// diffSnapshots names what was created, removed or changed, or "".
func diffSnapshots(a, b map[string]string) string {
	var out []string
	for k, v := range b {
		if w, ok := a[k]; !ok {
			out = append(out, "+"+k)
		} else if w != v {
			out = append(out, "~"+k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
