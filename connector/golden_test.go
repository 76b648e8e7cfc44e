package connector

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite connector/testdata/*.golden from the current specs")

// hostile are prompts that would be options, a subcommand or a shell if a harness parsed
// them: each must reach the harness as the text of the first turn.
var hostile = []string{
	`--settings={"apiKeyHelper":"touch /tmp/pwned"}`,
	"-p",
	"update",
	"--",
	"--prompt=x\nsecond line",
}

// render is a spec as text: command, one argument a line (quoted), environment, files.
func render(s Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "command %s\n", s.Command)
	for _, a := range s.Args {
		fmt.Fprintf(&b, "arg %s\n", strconv.Quote(a))
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "env %s=%s\n", k, strconv.Quote(s.Env[k]))
	}
	for _, d := range s.Dirs {
		fmt.Fprintf(&b, "dir %s\n", d)
	}
	for _, f := range s.Files {
		if f.Link != "" {
			fmt.Fprintf(&b, "link %s -> %s\n", f.Path, f.Link)
			continue
		}
		fmt.Fprintf(&b, "file %s\n", f.Path)
		for _, line := range strings.SplitAfter(strings.TrimSuffix(string(f.Data), "\n"), "\n") {
			fmt.Fprintf(&b, "  | %s\n", strings.TrimSuffix(line, "\n"))
		}
	}
	for _, r := range s.Remove {
		fmt.Fprintf(&b, "remove %s\n", r)
	}
	return b.String()
}

// TestGoldenSpecs compares each connector's spec, for a plain launch and for every hostile
// prompt, with connector/testdata/<name>.golden (go test ./connector -update rewrites
// them; read the diff before committing it).
func TestGoldenSpecs(t *testing.T) {
	for _, con := range All() {
		t.Run(con.Name, func(t *testing.T) {
			var b strings.Builder
			cases := append([]string{"start with the open issues"}, hostile...)
			for _, p := range cases {
				l := launch()
				l.Prompt, l.HasPrompt = p, true
				l.Model = map[string]string{"claude": "opus", "codex": "gpt-5", "opencode": "fake/model-1", "command": "m1"}[con.Name]
				if con.Name == "command" {
					l.Args = []string{"./bot", "-v"}
				} else {
					l.Args = []string{"--operator-flag"}
				}
				s, err := con.Build(l)
				if err != nil {
					t.Fatalf("prompt %q: %v", p, err)
				}
				fmt.Fprintf(&b, "## prompt %s\n%s\n", strconv.Quote(p), render(s))
			}
			path := filepath.Join("testdata", con.Name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./connector -run TestGoldenSpecs -update)", err)
			}
			if got := b.String(); got != string(want) {
				t.Fatalf("%s spec differs from %s:\n%s", con.Name, path, got)
			}
		})
	}
}

// TestPromptIsAValue: in every connector's argv, a prompt (whatever it starts with) sits
// where the harness reads a value: claude and codex after "--" as the last argument,
// opencode joined to --prompt=; command gets it only in COTAL_PROMPT. No argument before
// "--" is the prompt or holds it.
func TestPromptIsAValue(t *testing.T) {
	for _, p := range hostile {
		for _, con := range All() {
			l := launch()
			l.Prompt, l.HasPrompt, l.Args = p, true, []string{"./bot"}
			if con.Name != "command" {
				l.Args = nil
			}
			s, err := con.Build(l)
			if err != nil {
				t.Fatalf("%s %q: %v", con.Name, p, err)
			}
			args := s.Args
			switch con.Name {
			case "claude", "codex":
				n := len(args)
				if n < 2 || args[n-2] != "--" || strings.TrimSuffix(args[n-1], " ") != p {
					t.Errorf("%s %q: args %q do not end with -- and the prompt", con.Name, p, args)
					continue
				}
				if con.Name == "claude" && !strings.ContainsFunc(args[n-1], func(r rune) bool { return r == ' ' || r == '\n' }) {
					t.Errorf("claude %q: operand %q could name a subcommand", p, args[n-1])
				}
				args = args[:n-2]
			case "opencode":
				if len(args) != 1 || args[0] != "--prompt="+p {
					t.Errorf("opencode %q: args %q, want --prompt=<prompt> only", p, args)
				}
				args = nil
			case "command":
				if s.Env["COTAL_PROMPT"] != p {
					t.Errorf("command %q: COTAL_PROMPT %q", p, s.Env["COTAL_PROMPT"])
				}
			}
			for _, a := range args {
				if a == p || strings.Contains(a, "pwned") || strings.Contains(a, "second line") {
					t.Errorf("%s %q: the prompt is in argument %q before --", con.Name, p, a)
				}
			}
		}
	}
}
